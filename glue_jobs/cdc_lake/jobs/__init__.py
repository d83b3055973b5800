"""The five Glue jobs, one shape each: an options dataclass read from Glue's arguments, and ``run(options,
context, clients)``; every script under ``glue_jobs/`` calls ``entry.glue_entry`` with its job. Imports ``ops``,
``engine`` and ``core``."""
