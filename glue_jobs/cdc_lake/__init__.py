"""Replay AWS DMS full-load and CDC files into Apache Iceberg tables.

Importing the package loads no Spark: the Lambda and the CDK app use ``config`` and ``dms_files`` alone.
"""

__version__ = "0.1.0"
