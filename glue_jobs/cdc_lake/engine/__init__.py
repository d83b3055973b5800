"""The Spark and Iceberg engine the Glue jobs run: read DMS files, reduce changes, evolve schemas, commit a
table's batch with its history, run batches as the run mode says (``runs``), reload and maintain. Imports ``core``
only."""
