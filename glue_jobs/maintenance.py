"""Glue job: maintain the lake tables (compaction, snapshot expiry, orphan-file removal), or reload one table.

Arguments: --config_uri --action compact|expire|orphans|all [--table <schema>.<table>] [--catalog glue_catalog]
[--database NAME] [--retain_days 7] [--retain_last 20] [--orphan_days 3]. Without --table: every configured table.
--action reload --table <schema>.<table> --bucket <raw bucket> [--since <CDC file or time>]: rebuild the table
after DMS reloaded it (docs/deploy.md#reload). --action rejects-replay|rejects-accept --table <schema>.<table>:
apply a quarantining table's fixed rejects, or accept their loss (docs/bad-input.md#quarantine). --action all
--bucket <raw bucket> [--raw_retention_days N]: also remove the landed files each table applied once N days old
(the schedule's run; docs/deploy.md).
"""

from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.maintenance import MAINTENANCE

if __name__ == "__main__":
    glue_entry(MAINTENANCE)
