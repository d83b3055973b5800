"""Operator tools on top of the engine: reconcile a table against an export, export a table, the history
operations (rollback, re-apply), verify and repair against the source, check the source's catalog. Run from the
CLI; the drift and source-check Glue jobs (``cdc_lake.jobs``) run the last two."""
