"""Glue job: verify the lake tables against the live source, or repair their drifted keys (docs/drift.md).

Arguments: --config_uri --source_secret <DMS source secret ARN>
--source_engine postgres|aurora-postgresql|mysql|aurora|mariadb (oracle, sqlserver: refused, docs/sources.md)
--action verify|repair --bucket <raw bucket> [--source_database NAME] [--source_without_tls true]
[--source_ca <CA file>] [--table <schema>.<table>] [--catalog glue_catalog] [--database NAME]
[--settle_timeout 900]. Logs each differing key as DRIFT <json> and puts the number still differing as the
DriftedKeys metric, which the stack alarms on.
"""

from cdc_lake.jobs.drift import DRIFT
from cdc_lake.jobs.entry import glue_entry

if __name__ == "__main__":
    glue_entry(DRIFT)
