"""What the jobs make of their declared arguments (``cdc_lake.core.job_arguments``) beyond the fields themselves:
the live source, with the TLS its connection is checked with, and its URL from the secret (``source_url``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cdc_lake.core.job_arguments import SourceArguments
from cdc_lake.ops.source_check import engine_scheme, secret_url
from cdc_lake.ops.source_tls import SourceTls, job_tls


@dataclass(frozen=True)
class SourceOptions:
    """The live source of the jobs that read it: the DMS source endpoint's secret, the stack's engine, the
    database when the secret's is not the one, and the TLS the stack allows."""

    secret: str
    engine: str
    database: str | None
    tls: SourceTls

    @classmethod
    def of(cls, arguments: SourceArguments) -> SourceOptions:
        tls = job_tls(without_tls=arguments.source_without_tls, ca_file=arguments.source_ca)
        return cls(arguments.source_secret, arguments.source_engine, arguments.source_database, tls)


def source_url(source: SourceOptions, secrets: Any) -> str:
    """The source's URL from its secret, read with the Secrets Manager client ``secrets``. It holds the password:
    never print it unmasked. An engine the jobs cannot reach (Oracle, SQL Server) is refused before the secret is
    read."""
    engine_scheme(source.engine)
    secret = json.loads(secrets.get_secret_value(SecretId=source.secret)["SecretString"])
    return secret_url(secret, source.engine, source.database)
