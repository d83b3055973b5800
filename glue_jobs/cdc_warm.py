"""Glue job (runs.mode warm, a gluestreaming job on G.025X workers): one shard's tables replayed as their CDC files
land, one commit per table and batch, until the shard has been quiet for runs.warm.quiet_seconds or the run has
lived runs.warm.lifetime_hours. LOAD files and backlogs above runs.warm.handover_bytes are handed to the G.1X jobs.

Arguments: --config_uri --bucket --shard N --full_load_job NAME --cdc_replay_job NAME [--catalog glue_catalog]
[--database NAME] [--quiet_seconds N] [--config_version V] (the Lambda's: the configuration it routed by)
[--events_queues URL,...] (the shards' event queues, in shard order), and Glue's own --JOB_NAME and --JOB_RUN_ID.
"""

from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.warm import CDC_WARM

if __name__ == "__main__":
    glue_entry(CDC_WARM)
