"""Where Prefect's logs of `ksci evolve` go: the run's log file and the Prefect API (its UI), not the terminal.

Through Prefect's public logging settings, set before Prefect is imported (it configures logging on import):
PREFECT_LOGGING_SETTINGS_PATH names ksci/console/logging.yml, and PREFECT_LOGGING_HANDLERS_FILE_FILENAME (Prefect's
environment override of handlers.file.filename) the run's file. --verbose keeps today's logs on the terminal too.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

LOGGING_YML = Path(__file__).with_name("logging.yml")
LOG_NAME = "evolve.log"


def log_path_of(store_root: str, run: str, fallback_root: Path) -> Path:
    """<store>/<run>/evolve.log for a store on this machine's disk; for a store behind a URL (s3://...), a folder
    of the run under `fallback_root` (a log file is written where this process runs)."""
    local = "://" not in store_root or store_root.startswith("file://")
    root = Path(store_root.removeprefix("file://")) if local else fallback_root
    return root / run / LOG_NAME


def route_prefect_logs(log_path: Path, verbose: bool) -> None:
    """Call before Prefect is imported. Settings the user gave in the environment win."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_LOGGING_SETTINGS_PATH", str(LOGGING_YML))
    os.environ["PREFECT_LOGGING_HANDLERS_FILE_FILENAME"] = str(log_path)
    if verbose:
        os.environ.setdefault("PREFECT_LOGGING_ROOT_HANDLERS", "console,file")
    else:
        logging.captureWarnings(True)  # a library's warning goes to the log file (root logger), not the terminal
        # The stdlib's switch for a handler that fails to emit (its docs: False "in production"): Prefect's API log
        # handler then writes no "--- Error logging to API ---" into the terminal while the API is unreachable;
        # the CLI's one line says that the API did not answer.
        logging.raiseExceptions = False
