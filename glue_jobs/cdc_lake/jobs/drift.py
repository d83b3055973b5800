"""The drift job: ``cdc-lake verify`` or ``repair`` on the deployed lake, run in the source's network.

It reads the DMS source endpoint's secret, compares (and with ``--action repair`` rewrites) the configured
tables, re-checking changes in flight against the raw bucket, logs each differing key as ``DRIFT <json>`` and
puts the number still differing at the end as the ``DriftedKeys`` metric (0 too), which the stack alarms on.
The comparison and the repair are ``cdc_lake.ops.verify`` and ``cdc_lake.ops.repair``, as the CLI runs them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.core.job_arguments import DriftArguments
from cdc_lake.engine.context import ReplayContext
from cdc_lake.jobs.arguments import SourceOptions, source_url
from cdc_lake.jobs.entry import GlueJob, JobClients, lake_context
from cdc_lake.ops.repair import repair
from cdc_lake.ops.source_tls import SourceAddress
from cdc_lake.ops.verify import Settle, TableVerify, verify

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class DriftOptions(DriftArguments):
    """A drift run's options: its arguments as declared (``DriftArguments``), and the source they name."""

    @property
    def source(self) -> SourceOptions:
        return SourceOptions.of(self)


def run(options: DriftOptions, context: ReplayContext, clients: JobClients) -> list[TableVerify]:
    """Verify (or repair, then verify again) the configured tables; log each differing key, put how many are left."""
    config = context.config
    source = SourceAddress(source_url(options.source, clients.secrets), options.source.tls)
    settle = Settle(context, float(config.dms.cdc_max_batch_interval), timeout_s=options.settle_timeout)
    tables: Sequence[str] | None = [options.table] if options.table else None
    if options.action == "repair":
        for repaired in repair(context, source, tables, settle=settle):
            _log_drift(repaired.verified)
            if repaired.snapshot_id is not None:
                log.info("%s: repaired %d key(s) in change %d (source position %s)", repaired.table, repaired.keys,
                         repaired.snapshot_id, repaired.position)  # fmt: skip
        tables = tables or [t.name for t in config.tables]
        results = verify(context, source, tables, settle=settle)
    else:
        results = verify(context, source, tables, settle=settle)
        for result in results:
            _log_drift(result)
    left = sum(len(r.drift) for r in results)
    done = {"verify": "verified", "repair": "repaired"}[options.action]
    log.info("%d table(s) %s: %d key(s) differ from the source", len(results), done, left)
    clients.metrics.drifted_keys(left)
    return results


def _log_drift(result: TableVerify) -> None:
    for drift in result.drift:
        log.warning("DRIFT %s", json.dumps(drift.as_json()))


DRIFT = GlueJob("drift", DriftOptions, lake_context, run)
