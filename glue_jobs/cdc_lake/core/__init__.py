"""Spark-free core, shared by the Lambda, the Glue jobs and the CDK app: the configuration, DMS file names
and their order, batch plans, object stores, column shapes, names and errors. Imports nothing else of
``cdc_lake`` and never PySpark."""
