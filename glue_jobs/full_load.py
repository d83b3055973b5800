"""Glue job: apply full-load (LOAD) files and whatever landed after them: every table's landed files
(runs.mode coalesced), or --key's table up to --key (per_file).

Arguments: --config_uri --bucket --key --table [--catalog glue_catalog] [--database NAME] [--idle_seconds N].
"""

import boto3

from cdc_lake.engine.jobs import JobClients, glue_main

if __name__ == "__main__":
    glue_main("full_load", JobClients(s3=boto3.client("s3"), cloudwatch=boto3.client("cloudwatch")))
