"""Laptop only: the CLI, the demo, the generator, fake S3 events, the local Spark session with Glue's jars,
the local AWS endpoint and the deployed stack run here. Never shipped in a bundle."""
