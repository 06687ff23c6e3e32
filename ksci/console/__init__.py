"""What `ksci evolve` shows in a terminal: a progress display (display.py) fed by the flow's events (events.py),
Prefect's logs routed to the run's log file (logs.py), and signals that stop the run in order (stop.py); and the
problems' listing of `ksci problems` (listing.py).

No Prefect import here: the flows call ksci.console.events, and the CLI sets up the rest before Prefect starts."""
