"""Glue job: replay a table's pending CDC files (I/U/D) up to the one named by --key, in one commit.

Arguments: --config_uri --bucket --key --table [--catalog glue_catalog] [--database NAME].
"""

from cdc_lake.jobs import glue_main

if __name__ == "__main__":
    glue_main("cdc_replay")
