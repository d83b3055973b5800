"""Glue job: check the table configuration against the live source's catalog (docs/deploy.md#source-check).

Arguments: --config_uri --source_secret <DMS source secret ARN> --source_engine postgres|mysql|aurora
[--source_database NAME]. Logs each difference (a column added or dropped, a type or key changed, a table
missing) and puts their count as the SourceDifferences metric, which the stack alarms on.
"""

from cdc_lake.ops.source_check import glue_main

if __name__ == "__main__":
    glue_main()
