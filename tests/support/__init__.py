"""What the tests share, by subject: the lake under test (``lake``), configurations (``configs``), the ``cdc-lake``
command (``cli``), the local AWS endpoint's clients (``aws``), a deployed Glue run's world (``glue_run``), the real
sources' servers (``servers``, ``tls``), the checks of a lake and a configuration against them (``source_tables``,
``source_config``) and the drift scenarios every source runs (``verify_cases``), DMS's own sample files
(``dms_samples``), and the model the lost-wake-up tests explore (``protocol``). Fixtures stay in the conftests."""
