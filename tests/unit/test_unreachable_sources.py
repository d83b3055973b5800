"""Oracle and SQL Server are refused by the source commands and the source jobs before anything is done: the
message names the engine, says why, names what works instead, and never shows the URL's password; Aurora
PostgreSQL and MariaDB reach their readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.exceptions import UnreachableSourceError
from cdc_lake.jobs.arguments import SourceOptions, source_url
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_check import (
    ENGINE_SCHEMES,
    UNREACHABLE_ENGINES,
    dialect,
    engine_scheme,
    refuse_unreachable,
    secret_url,
)
from cdc_lake.ops.source_tls import SourceTls
from tests.support.cli import cli
from tests.support.passwords import PIECES

# Each spelling of an Oracle or SQL Server source, with a password no message may show; the engine's name and
# the scheme (or the ODBC form) the message names.
SPELLINGS = [
    ("oracle://reader:Qx7k@Zm9w@db.example:1521/ORCL", "Oracle", "--source (oracle:…)"),
    ("oracle+cx_oracle://reader:Qx7kZm9w@db.example:1521/?service_name=ORCL", "Oracle", "(oracle+cx_oracle:…)"),
    ("oracle+oracledb://reader:Qx7kZm9w@db.example/ORCL", "Oracle", "(oracle+oracledb:…)"),
    ("jdbc:oracle:thin:reader/Qx7kZm9w@db.example:1521/ORCL", "Oracle", "(jdbc:oracle:…)"),
    ("JDBC:Oracle:thin:@//db.example:1521/ORCL", "Oracle", "(JDBC:Oracle:…)"),
    ("sqlserver://reader:Qx7k:Zm9w@db.example:1433/shop", "SQL Server", "--source (sqlserver:…)"),
    ("mssql://reader:Qx7kZm9w@db.example/shop", "SQL Server", "(mssql:…)"),
    ("mssql+pyodbc://reader:Qx7kZm9w@db.example/shop?driver=ODBC+Driver+18", "SQL Server", "(mssql+pyodbc:…)"),
    ("mssql+pymssql://reader:Qx7kZm9w@db.example/shop", "SQL Server", "(mssql+pymssql:…)"),
    ("jdbc:sqlserver://db.example:1433;databaseName=shop;user=reader;password=Qx7k Zm9w", "SQL Server",
     "(jdbc:sqlserver:…)"),
    ("Driver={ODBC Driver 18 for SQL Server};Server=tcp:db.example,1433;Uid=reader;Pwd=Qx7kZm9w", "SQL Server",
     "--source (an ODBC connection string)"),
    ("DRIVER={Oracle in OraClient19Home1};DBQ=db.example:1521/ORCL;UID=reader;PWD=Qx7kZm9w", "Oracle",
     "(an ODBC connection string)"),
]  # fmt: skip
ANCHORS = {"Oracle": "docs/sources.md#oracle", "SQL Server": "docs/sources.md#sql-server"}


def check_refusal(message: str, engine: str, named: str) -> None:
    assert not PIECES.search(message), message
    assert named in message, message
    assert f"names {engine}: cdc-lake verify, repair, config-from-source and config-check-source" in message
    assert f"cannot reach {engine}: no real {engine} database runs in this project's tests" in message
    assert "`cdc-lake config-from-files` writes the table configuration" in message
    assert "the replay applies them" in message and ANCHORS[engine] in message


@pytest.mark.parametrize(("url", "engine", "named"), SPELLINGS)
def test_dialect_refuses_oracle_and_sql_server_urls_without_their_password(url: str, engine: str, named: str) -> None:
    with pytest.raises(UnreachableSourceError) as refused:
        dialect(url)
    check_refusal(str(refused.value), engine, named)
    assert refused.value.without_values() == str(refused.value)


# Each command refuses before it reads its configuration (the file does not exist) or starts anything.
COMMANDS = [
    ["verify", "-c", "missing.yaml", "-w", "missing-warehouse"],
    ["repair", "-c", "missing.yaml", "-w", "missing-warehouse", "-l", "missing-landing"],
    ["config-from-source"],
    ["config-check-source", "-c", "missing.yaml"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("url", "engine", "named"), [SPELLINGS[1], SPELLINGS[9]], ids=["oracle", "sqlserver"])
def test_each_source_command_refuses_up_front(
    command: list[str], url: str, engine: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tables.yaml"
    extra = ["-o", out] if command[0] == "config-from-source" else []
    code, printed = cli(capsys, *command, *extra, "--source", url)
    assert code == 2 and printed.startswith("cdc-lake: --source ("), printed
    check_refusal(printed, engine, named)
    assert not out.exists() and "missing.yaml" not in printed


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://reader@db.example/shop",
        "postgres://reader@db.example/shop",
        "host=db.example dbname=oracle user=sqlserver password=mssql",  # the words elsewhere than the scheme
        "postgresql://oracle:sqlserver@db.example/oracle?application_name=mssql",
        "mysql://reader@db.example/shop",
        "mariadb://reader@db.example/shop",
    ],
)
def test_other_urls_keep_their_reader(url: str) -> None:
    refuse_unreachable(url)
    expected = mysql_catalog.read_catalog if url.startswith(("mysql", "mariadb")) else source_catalog.read_catalog
    assert dialect(url).read_catalog is expected


class Secrets:
    """A Secrets Manager fake: the secret it holds, and how often it was read."""

    def __init__(self, secret: str) -> None:
        self.secret, self.reads = secret, 0

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:
        self.reads += 1
        return {"SecretString": self.secret}


SECRET = '{"host": "db.example", "port": 5432, "username": "reader", "password": "Qx7k:Zm9w", "dbname": "shop"}'


@pytest.mark.parametrize(("engine", "name"), UNREACHABLE_ENGINES.items())
def test_the_source_jobs_refuse_oracle_and_sql_server_before_reading_the_secret(engine: str, name: str) -> None:
    secrets = Secrets(SECRET)
    with pytest.raises(UnreachableSourceError) as refused:
        source_url(SourceOptions("arn:secret", engine, None, SourceTls()), secrets)
    check_refusal(str(refused.value), name, f"--source_engine {engine} names {name}")
    assert secrets.reads == 0
    with pytest.raises(UnreachableSourceError, match=f"^--source_engine {engine} names {name}"):
        secret_url({"host": "db", "username": "u", "password": "Qx7k"}, engine)


def test_aurora_postgresql_and_mariadb_make_their_engines_urls() -> None:
    secrets = Secrets(SECRET)
    assert source_url(SourceOptions("arn:secret", "aurora-postgresql", None, SourceTls()), secrets) == (
        "postgresql://reader:Qx7k%3AZm9w@db.example:5432/shop"
    )
    assert secrets.reads == 1
    assert source_url(SourceOptions("arn:secret", "mariadb", "other", SourceTls()), secrets) == (
        "mysql://reader:Qx7k%3AZm9w@db.example:5432/other"
    )
    assert engine_scheme("postgres") == engine_scheme("aurora-postgresql") == "postgresql"


def test_every_engine_the_stack_accepts_is_reached_or_refused() -> None:
    from infra.settings import SOURCE_ENGINES

    assert set(ENGINE_SCHEMES).isdisjoint(UNREACHABLE_ENGINES)
    assert set(SOURCE_ENGINES) <= set(ENGINE_SCHEMES) | set(UNREACHABLE_ENGINES)
    assert set(ENGINE_SCHEMES) | set(UNREACHABLE_ENGINES) == {
        "mysql", "aurora", "mariadb", "postgres", "aurora-postgresql", "oracle", "sqlserver"
    }  # fmt: skip
