"""How a replay job runs, one module per run mode (``core.run_modes`` lists them): ``per_file``, ``coalesced``,
``warm``; beside them what they share: what a run did (``outcome``), what a caller adds to one and a long-lived
run's protocol (``shift``), how long landed files wait (``waiting``), and the run's own listings (``listings``)."""
