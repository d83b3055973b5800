"""Replay AWS DMS full-load and CDC files into Apache Iceberg tables.

The package is split by where its code runs; a module's package is its contract, and imports only go down
this list (tests/unit/test_architecture.py enforces it):

- ``core``: no Spark. The Lambda, the Glue jobs and the CDK app share it; the Lambda bundle holds only this.
- ``engine``: Spark and Iceberg, run by the Glue jobs; the Glue bundle holds what the job scripts import.
- ``ops``: operator tools (reconcile, export, history operations) on top of the engine, run from the CLI.
- ``local``: the laptop only: the CLI, the demo, the generator, the local Spark session and AWS endpoint.
"""

__version__ = "0.1.0"
