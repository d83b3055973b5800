"""Source URLs with a password no message may show, not even a piece of it, and the pieces to look for."""

from __future__ import annotations

import re

# Each password is made of pieces no message holds by chance; the separators are what breaks a URL apart.
URLS = [
    "postgresql://reader:Qx7k@Zm9w:Vb4t@127.0.0.1:1/db",  # an unescaped @ and :
    "postgresql://reader:Qx7k/Zm9w@127.0.0.1:1/db",  # an unescaped / ends the authority early
    "postgresql://reader:Qx7k#Zm9w@127.0.0.1:1/db",
    "postgresql://reader:Qx7k%zzZm9w@127.0.0.1:1/db",  # a bad percent escape
    "postgresql://reader:Qx7kZm9w@[::1/db",
    "host=127.0.0.1 port=1 password=Qx7k Zm9w user=reader",  # an unquoted space in a conninfo
    "host=127.0.0.1 port=1 password='Qx7k Zm9w' user=reader",
    "postgresql://reader:Qx7kZm9w@127.0.0.1:1/db",
]
MYSQL_URLS = [
    "mysql://reader:Qx7k@Zm9w:Vb4t@127.0.0.1:1/db",
    "mysql://reader:Qx7k/Zm9w@127.0.0.1:1/db",
    "mysql://reader:Qx7k#Zm9w@127.0.0.1:1/db",
    "mysql://reader:Qx7kZm9w@[::1/db",
    "mysql://reader:Qx7kZm9w@127.0.0.1:1/db",
]
PIECES = re.compile(r"Qx7k|Zm9w|Vb4t|Qx7|x7k|Zm9|m9w|Vb4|b4t")
