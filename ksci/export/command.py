"""`ksci export`: its arguments and its handler (ksci/cli.py registers it). The work is ksci.export.export_run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ksci.export.source import ExportRefused


def add_export_command(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's best (or a named) ok kernel as an installable Python package with a torch custom op, "
        "its library built for the run's architecture, tests and a benchmark (docs/export.md)",
    )
    p.add_argument("--run", required=True, help="the run's name (a folder of the store)")
    p.add_argument("--candidate", help="a candidate id (or a unique prefix of one) (default: the run's best ok one)")
    p.add_argument(
        "-o", "--output", type=Path, help="the package's folder, which must not exist (default: ./ksci_PROBLEM)"
    )
    p.add_argument(
        "--arch",
        action="append",
        metavar="ARCH",
        help="an architecture to build a library for; repeat for several (default: the candidate's own, e.g. sm_90a)",
    )
    p.add_argument("--store", help="lineage store: a folder or an fsspec URL (default: data/runs)")
    p.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from ksci import PROJECT_ROOT
    from ksci.export.run import export_run

    try:
        written = export_run(
            args.store or PROJECT_ROOT / "data" / "runs", args.run, args.candidate, args.output, args.arch
        )
    except ExportRefused as exc:
        print(f"ksci: cannot export: {exc}", file=sys.stderr)
        return exc.code
    print(f"wrote {written.folder} ({written.summary})")
    print(f"  install: pip install --no-build-isolation --no-deps {written.folder}")
    return 0
