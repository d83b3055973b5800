"""The S3-triggered Lambda: every DMS file that lands starts the matching Glue job run.

``routing`` turns an event into job-run requests (pure), ``handler`` starts them on Glue. It imports
``cdc_lake.core`` alone and never PySpark; the local runtime builds its events with ``cdc_lake.local.events``.
"""
