"""A stand-in for the harness child in isolate/sandbox tests: a Python script that reports on the --report-fd pipe."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

PREAMBLE = """
import json, os, sys
fd = int(sys.argv[sys.argv.index("--report-fd") + 1])
report = os.fdopen(fd, "w", buffering=1)
def send(event, **kw):
    report.write(json.dumps({"event": event, **kw}) + "\\n")
"""


def reporting_child(tmp_path: Path, body: str) -> list[str]:
    """argv of a child whose `body` may call send(event, **fields); run_child appends --report-fd N."""
    path = tmp_path / "child.py"
    path.write_text(PREAMBLE + textwrap.dedent(body))
    return [sys.executable, str(path)]
