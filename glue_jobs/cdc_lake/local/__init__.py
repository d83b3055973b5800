"""The local runtime: the deployed pipeline's routing and jobs, run in a local Spark session."""
