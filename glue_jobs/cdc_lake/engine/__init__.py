"""The Spark and Iceberg engine the Glue jobs run: read DMS files, reduce changes, evolve schemas, commit a
table's batch with its history, drain every pending table, reload and maintain. Imports ``core`` only."""
