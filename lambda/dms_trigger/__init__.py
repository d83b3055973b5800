"""The S3-triggered Lambda: every DMS file that lands starts the matching Glue job run.

``routing`` turns an event into job-run requests (pure), ``handler`` starts them on Glue, ``events`` builds
real-shaped S3 events for the local runtime and the tests. Never imports PySpark.
"""
