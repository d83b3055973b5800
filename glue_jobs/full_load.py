"""Glue job: apply a table's full-load (LOAD) files up to the one named by --key.

Arguments: --config_uri --bucket --key --table [--catalog glue_catalog] [--database NAME].
"""

from cdc_lake.jobs import glue_main

if __name__ == "__main__":
    glue_main("full_load")
