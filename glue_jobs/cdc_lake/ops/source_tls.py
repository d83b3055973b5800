"""Checked TLS to the source database: every connection that carries its credentials checks the server's
certificate against a CA and the server's name against the certificate, or is refused before it is made.

PostgreSQL connects with ``sslmode=verify-full`` (a URL naming a weaker mode is refused), MySQL and MariaDB with
PyMySQL's TLS, a CA (``ssl_ca``) and a host-name check. A source without TLS, or with a certificate nobody can
check, is reached only when a setting says so (``--source-without-tls`` on the command line, ``sourceWithoutTls``
in the stack), and each such connection is logged as a warning.

The source's password reaches no message: ``masked`` and ``redacted`` take it out of what is shown, and a
``SourceAddress`` prints its host and database only.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cdc_lake.core.exceptions import CdcLakeError

log = logging.getLogger(__name__)

CLI_SETTING = "--source-without-tls"
STACK_SETTING = "the stack setting sourceWithoutTls (docs/deploy.md#source-tls)"
# What each weaker libpq mode leaves unchecked.
WEAK_MODES = {
    "disable": "no TLS at all",
    "allow": "TLS only if the server insists, and no certificate check",
    "prefer": "falls back to plaintext and checks no certificate",
    "require": "encrypts but checks no certificate: anyone in the path can pose as the server",
    "verify-ca": "checks the certificate's CA but not that it names this server",
}
_TLS_WORDS = ("ssl", "tls", "certificate")
# The CA bundle the Glue jobs check the source with: packaged beside this module in the jobs' library
# (infra/packaging.py: Amazon RDS's CAs, or the stack's sourceCaFile).
BUNDLED_CA = "source-ca.pem"


@dataclass(frozen=True)
class SourceTls:
    """How a connection to the source is secured: ``required`` checked TLS (the default), the CA file to check the
    server's certificate with when the URL names none, and the setting that allows less, named in refusals."""

    required: bool = True
    ca_file: str | None = None
    allowed_by: str = CLI_SETTING

    def hint(self) -> str:
        return (
            "cdc-lake checks the source's certificate and name: give the CA that signed it (PostgreSQL: "
            "sslrootcert=<file>, MySQL: ssl_ca=<file>; for RDS its CA bundle, docs/deploy.md#source-tls), or, for a "
            f"source without TLS, allow it with {self.allowed_by}"
        )

    def announce(self, where: str) -> None:
        log.warning("%s: the source's certificate is not checked (allowed by %s)", where, self.allowed_by)


CHECKED = SourceTls()


# A conninfo's password: quoted (spaces allowed) or up to the next keyword, so a value with an unquoted space is
# masked whole, not only to its first word.
_CONNINFO_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|.*?)(?=\s+\w+\s*=|\s*$)")


def _secret(url: str) -> str:
    """The password part of a source URL or conninfo, as written (empty: none), found by the widest reading, since
    libpq, PyMySQL and ``urlsplit`` split a malformed URL differently: everything after the first ``:`` of the
    user part, which ends at the URL's last ``@``."""
    found = _CONNINFO_PASSWORD.search(url)
    if found:
        return found.group(2)
    _, scheme_found, rest = url.partition("://")
    user, at, _ = rest.rpartition("@")
    return user.partition(":")[2] if scheme_found and at else ""


def masked(url: str) -> str:
    """The source URL with its password, if any, replaced: fit for messages and the generated file."""
    secret = _secret(url)
    return url.replace(secret, "***") if secret else url


def redacted(text: str, url: str) -> str:
    """``text`` (a driver's error about ``url``) without any fragment of the URL's password: libpq and the
    drivers quote the part of a malformed URL they stumbled on, which may be a piece of it."""
    secret = _secret(url)
    if not secret:
        return text

    def hide(match: re.Match[str]) -> str:
        token = match.group(0).strip("'\"")
        return "***" if len(token) >= 2 and (token in secret or secret in token) else match.group(0)

    return re.sub(r"'[^']*'|\"[^\"]*\"|[^\s'\"]+", hide, text.replace(secret, "***"))


# A conninfo's ``keyword=value`` pairs, the value quoted or up to the next space.
_CONNINFO_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


@dataclass(frozen=True)
class SourceAddress:
    """A source database's URL (libpq URL or conninfo, or ``mysql://``) and how its TLS is checked. Its repr (and
    str) names the host and the database only: the URL may hold the password."""

    url: str = field(repr=False)
    tls: SourceTls = CHECKED

    def __repr__(self) -> str:
        host, database = _host_and_database(self.url)
        return f"SourceAddress(host={host!r}, database={database!r}, tls={self.tls!r})"


def _host_and_database(url: str) -> tuple[str | None, str | None]:
    """The host and database ``url`` names, read from it with its password masked first (``masked`` finds the
    password by the widest reading, so no piece of a malformed URL's password is taken for a host or a path)."""
    shown = masked(url)
    if "://" not in shown:
        pairs = {key: value.strip("'") for key, value in _CONNINFO_PAIR.findall(shown)}
        return pairs.get("host") or pairs.get("hostaddr"), pairs.get("dbname")
    try:
        parts = urlsplit(shown)
        return parts.hostname, unquote(parts.path.lstrip("/")) or None
    except ValueError:  # a malformed URL: say nothing of it
        return None, None


def postgres_conninfo(url: str, tls: SourceTls, where: str) -> str:
    """The conninfo to connect with: ``url`` with ``sslmode=verify-full`` (and ``tls.ca_file`` as its root
    certificate when it names none), refused when it asks for less and ``tls`` does not allow it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    if not tls.required:
        tls.announce(where)
        return url
    mode = str(params.get("sslmode") or os.environ.get("PGSSLMODE") or "verify-full")
    if mode != "verify-full":
        raise CdcLakeError(
            f"cannot connect to the source {where}: sslmode={mode} {WEAK_MODES.get(mode, 'is not verify-full')}; "
            f"remove it or write sslmode=verify-full. {tls.hint()}"
        )
    extra: dict[str, Any] = {"sslmode": "verify-full"}
    if tls.ca_file and not params.get("sslrootcert") and not os.environ.get("PGSSLROOTCERT"):
        extra["sslrootcert"] = tls.ca_file
    return make_conninfo(url, **extra)


def mysql_ssl(options: dict[str, str], tls: SourceTls, where: str) -> dict[str, Any] | None:
    """PyMySQL's ``ssl`` argument for a URL's query ``options``: the CA (``ssl_ca``, else ``tls.ca_file``) with
    the certificate and host name checked; refused when there is no CA and ``tls`` does not allow it."""
    ca = options.get("ssl_ca") or tls.ca_file
    if not tls.required:
        tls.announce(where)
        return {"ca": ca} if ca else None
    if not ca:
        raise CdcLakeError(f"cannot connect to the source {where}: no CA to check its certificate with. {tls.hint()}")
    # With a CA given, PyMySQL refuses a server that offers no TLS instead of falling back to plaintext.
    return {"ca": ca, "check_hostname": True, "verify_mode": True}


def explained(reason: str, tls: SourceTls) -> str:
    """A driver's refusal, with what to do when it is about TLS."""
    return f"{reason}. {tls.hint()}" if tls.required and any(w in reason.lower() for w in _TLS_WORDS) else reason


def bundled_ca_file() -> str | None:
    """The packaged CA bundle as a file the drivers can open, if packaged. From the library's zip (as the Glue jobs
    run it) it is copied into a new folder only this user can enter, with a name nobody can guess (``mkdtemp``)
    and removed at exit: a fixed path in the shared temporary folder could be planted first by another user."""
    packaged = resources.files(__package__ or "cdc_lake.ops").joinpath(BUNDLED_CA)
    if not packaged.is_file():
        return None
    if isinstance(packaged, Path):  # the library unpacked: the file itself
        return str(packaged)
    folder = tempfile.mkdtemp(prefix="cdc-lake-ca-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    target = Path(folder) / BUNDLED_CA
    target.write_bytes(packaged.read_bytes())
    return str(target)


def job_tls(*, without_tls: bool, ca_file: str | None) -> SourceTls:
    """A Glue job's TLS to the source from its arguments: ``--source_without_tls true`` (the stack's
    sourceWithoutTls) allows less, ``--source_ca`` names a CA file, else the packaged bundle."""
    return SourceTls(required=not without_tls, ca_file=ca_file or bundled_ca_file(), allowed_by=STACK_SETTING)
