"""The Glue jobs of ``core.glue_jobs.GLUE_JOBS``, one shape each: an options dataclass of the job's declared
arguments (``core.job_arguments``), and ``run(options, context, clients)``; every script under ``glue_jobs/`` calls
``entry.glue_entry`` with its job. Imports ``ops``, ``engine`` and ``core``."""
