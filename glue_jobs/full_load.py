"""Glue job: apply full-load (LOAD) files and whatever landed after them: every table's landed files
(runs.mode coalesced), or --key's table up to --key (per_file).

Arguments: --config_uri --bucket --key --table [--catalog glue_catalog] [--database NAME] [--idle_seconds N]
[--one_table true] (only --table up to --key, whatever runs.mode says: what a warm run hands over).
"""

from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.replay import FULL_LOAD

if __name__ == "__main__":
    glue_entry(FULL_LOAD)
