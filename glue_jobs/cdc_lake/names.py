"""Names and defaults shared by the Glue jobs, the Lambda and the CDK stack; pure, so all three import it."""

from __future__ import annotations

from typing import Literal

JobKind = Literal["full_load", "cdc_replay"]
JOB_KINDS: tuple[JobKind, ...] = ("full_load", "cdc_replay")

# The Spark catalog name the Glue jobs register the Glue Data Catalog under (job --conf and --catalog).
GLUE_CATALOG = "glue_catalog"

# Maintenance retention: snapshots younger than RETAIN_DAYS stay for rollback, the newest RETAIN_LAST
# stay whatever their age, and only unreferenced files older than ORPHAN_DAYS are orphans (younger ones
# may belong to a running commit).
RETAIN_DAYS = 7
RETAIN_LAST = 20
ORPHAN_DAYS = 3
