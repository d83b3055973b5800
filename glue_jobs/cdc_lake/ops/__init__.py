"""Operator tools on top of the engine: reconcile a table against an export, export a table, and the
history operations (rollback, re-apply). Run from the CLI; never part of a Glue job's bundle."""
