"""The source engines the stack replicates from, in one table: the settings, the DMS source endpoint, its TLS, the
source jobs (infra/source_check.py), the docs and the tests read it, and nothing lists the engines by hand.

A row's name is both the ``sourceEngine`` context value and DMS's ``EngineName`` (AWS::DMS::Endpoint; DMS API
``Endpoint.EngineName``). What each row sets beyond the secret, and why, is in docs/deploy.md#source-engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from cdc_lake.core.config import SourceEngine
from infra.wheels import WheelGroup

# The AWS::DMS::Endpoint property (as aws_cdk.aws_dms.CfnEndpoint names it) that carries the engine's settings.
EngineSettingsProperty = Literal[
    "my_sql_settings", "postgre_sql_settings", "oracle_settings", "microsoft_sql_server_settings"
]
# The strongest SslMode DMS offers each engine (DMS user guide, CHAP_Security.SSL.html, its table of modes):
# verify-full for MySQL, MariaDB, Aurora MySQL, PostgreSQL and SQL Server; Oracle only none and verify-ca, with an
# Oracle wallet instead of a PEM bundle (CHAP_Source.Oracle.html#CHAP_Security.SSL.Oracle).
SslMode = Literal["verify-full", "verify-ca"]


@dataclass(frozen=True)
class SourceEngineFacts:
    """One source engine: how DMS reaches it, and whether the stack's source jobs can."""

    name: SourceEngine
    display_name: str
    default_port: int
    settings_property: EngineSettingsProperty
    # Whether the endpoint needs sourceDatabase: PostgreSQL's database, SQL Server's, Oracle's service name or SID.
    needs_database: bool
    ssl_mode: SslMode
    # The driver wheels the source check, drift and repair jobs connect with; None: the stack deploys no source
    # jobs for the engine (no driver in the jobs, nothing to test them against), `cdc-lake config-from-files` it is.
    driver: WheelGroup | None
    # The endpoint settings besides the secret, as the settings property's keyword arguments.
    cdc_settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source_jobs(self) -> bool:
        return self.driver is not None

    @property
    def wallet(self) -> bool:
        """Checked with an Oracle wallet (CfnCertificate.certificate_wallet), not the PEM bundle."""
        return self.ssl_mode == "verify-ca"


_ENGINES = (
    # MySQL-compatible: DMS reads the binary log (binlog_format=ROW on the server); nothing to set on the endpoint.
    SourceEngineFacts("mysql", "MySQL", 3306, "my_sql_settings", False, "verify-full", "mysql"),
    SourceEngineFacts("aurora", "Aurora MySQL", 3306, "my_sql_settings", False, "verify-full", "mysql"),
    SourceEngineFacts("mariadb", "MariaDB", 3306, "my_sql_settings", False, "verify-full", "mysql"),
    # PostgreSQL: DMS makes its own logical replication slot and picks the plugin (pglogical when installed, else
    # test_decoding); nothing pinned, as for postgres until now.
    SourceEngineFacts("postgres", "PostgreSQL", 5432, "postgre_sql_settings", True, "verify-full", "postgres"),
    SourceEngineFacts(
        "aurora-postgresql", "Aurora PostgreSQL", 5432, "postgre_sql_settings", True, "verify-full", "postgres"
    ),
    # Oracle: LogMiner, DMS's default, pinned (Binary Reader needs directory grants and, on RDS, five path settings;
    # CHAP_Source.Oracle.html#CHAP_Source.Oracle.CDC). No AddSupplementalLogging: it adds PRIMARY KEY logging
    # only, where an S3 target needs every column logged (the page's limitations), which the DBA sets up instead.
    SourceEngineFacts(
        "oracle",
        "Oracle",
        1521,
        "oracle_settings",
        True,
        "verify-ca",
        None,
        {"use_logminer_reader": True, "add_supplemental_logging": False},
    ),
    # SQL Server: RDS offers no MS-Replication, so DMS reads MS-CDC, which the master user turns on
    # (rds_cdc_enable_db, sp_cdc_enable_table); SetUpMsCdcForTables would need sysadmin, which RDS does not grant
    # (CHAP_Source.SQLServer.CDC.html#CHAP_Source.SQLServer.Configuration). Nothing to set on the endpoint.
    SourceEngineFacts("sqlserver", "SQL Server", 1433, "microsoft_sql_server_settings", True, "verify-full", None),
)
SOURCE_ENGINES: Mapping[SourceEngine, SourceEngineFacts] = MappingProxyType({e.name: e for e in _ENGINES})
ENGINE_NAMES: tuple[SourceEngine, ...] = tuple(SOURCE_ENGINES)
