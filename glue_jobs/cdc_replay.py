"""Glue job: replay pending DMS files (I/U/D) into the lake, one commit per table and batch: every table's
landed files, round after round up to the time budget (runs.mode coalesced), or --key's table up to --key
(per_file). Fails, after applying the others, when a table's batch was refused.

Arguments: --config_uri --bucket --key --table [--catalog glue_catalog] [--database NAME] [--idle_seconds N]
[--one_table true] (only --table up to --key, whatever runs.mode says: what a warm run hands over).
"""

from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.replay import CDC_REPLAY

if __name__ == "__main__":
    glue_entry(CDC_REPLAY)
