"""The source-check job: the table configuration checked against the live source's catalog, on a schedule.

It reads the DMS source endpoint's secret, reaches the source through the job's network connection, logs each
difference and puts their count as the ``SourceDifferences`` metric (0 too: the alarm sees the job ran). The check
itself is ``cdc_lake.ops.source_check``, which ``cdc-lake config-check-source`` runs from a laptop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.job_arguments import SourceCheckArguments
from cdc_lake.jobs.arguments import SourceOptions, source_url
from cdc_lake.jobs.entry import GlueJob, JobClients, configuration
from cdc_lake.ops.source_catalog import Difference
from cdc_lake.ops.source_check import check_source

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SourceCheckOptions(SourceCheckArguments):
    """A source check's options: its arguments as declared (``SourceCheckArguments``), and the source they name."""

    @property
    def source(self) -> SourceOptions:
        return SourceOptions.of(self)


def run(options: SourceCheckOptions, config: PipelineConfig, clients: JobClients) -> list[Difference]:
    """Check the configuration against the source; log each difference and put their count."""
    _, found = check_source(config, source_url(options.source, clients.secrets), options.source.tls)
    for difference in found:
        log.warning("SOURCE DIFFERENCE %s", difference)
    log.info("%d table(s) checked against the source: %d difference(s)", len(config.tables), len(found))
    clients.metrics.source_differences(len(found))
    return found


SOURCE_CHECK = GlueJob("source_check", SourceCheckOptions, configuration, run)
