"""Glue job: check the table configuration against the live source's catalog (docs/deploy.md#source-check).

Arguments: --config_uri --source_secret <DMS source secret ARN>
--source_engine postgres|aurora-postgresql|mysql|aurora|mariadb (oracle, sqlserver: refused, docs/sources.md)
[--source_database NAME] [--source_without_tls true] [--source_ca <CA file>]. Logs each difference (a column
added or dropped, a type or key changed, a table missing) and puts their count as the SourceDifferences metric,
which the stack alarms on.
"""

from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.source_check import SOURCE_CHECK

if __name__ == "__main__":
    glue_entry(SOURCE_CHECK)
