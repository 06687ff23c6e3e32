"""Import every task of a gpu-mode reference-kernels checkout and every file of KernelBench's levels 1-3 with
`ksci import`'s code, each in its own child process under a time limit, and print a table: the task, imported or
refused, the one-line reason, and the totals per source.

    python benchmarks/import_corpus.py --gpumode /path/reference-kernels --kernelbench /path/KernelBench
    python benchmarks/import_corpus.py --gpumode DIR --only amd/moe pmpp_v2/sort     (these tasks only)
    python benchmarks/import_corpus.py ... --dest DIR      (keep the imported folders there; a temporary one else)
    python benchmarks/import_corpus.py --kernelbench DIR --kernelbench-in-process   (no child per file: faster)

The commit of each checkout (git rev-parse HEAD, where it is a git work tree) is printed above its table. CPU only:
the importer runs references on small real CPU tensors (docs/problem-format.md, "Imported problems").
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import sys
from pathlib import Path
from ksci.importers.gpumode import import_gpumode
from ksci.importers.kernelbench import import_kernelbench
fmt, path, name, dest = sys.argv[1:5]
importer = import_gpumode if fmt == "gpumode" else import_kernelbench
result = importer(Path(path), name, Path(dest), replace=True)
print("RESULT", "refused " + str(result) if hasattr(result, "construct") else "imported")
"""


def gpumode_tasks(checkout: Path) -> list[tuple[str, Path]]:
    problems = checkout / "problems"
    return [(str(t.parent.relative_to(problems)), t.parent) for t in sorted(problems.rglob("task.yml"))]


def kernelbench_files(checkout: Path) -> list[tuple[str, Path]]:
    base = checkout / "KernelBench" if (checkout / "KernelBench").is_dir() else checkout
    return [(str(f.relative_to(base)), f) for level in (1, 2, 3) for f in sorted((base / f"level{level}").glob("*.py"))]


def _name(label: str) -> str:
    import re

    name = re.sub(r"[^a-z0-9]+", "_", label.lower().removesuffix(".py")).strip("_")
    return f"p_{name}"[:64]


def import_one(fmt: str, label: str, path: Path, dest: Path, timeout: float) -> tuple[str, str, float]:
    """(label, 'imported' or 'refused', the one-line reason) for one source, in a child process under `timeout`."""
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env["KSCI_KERNELS_DIR"] = str(dest)
    command = [sys.executable, "-c", CHILD, fmt, str(path), _name(label), str(dest)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "refused", f"timeout: the import took over {timeout:.0f} s", time.monotonic() - started
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if lines:
        verdict, _, reason = lines[-1].removeprefix("RESULT ").partition(" ")
        return verdict, reason, time.monotonic() - started
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return "error", f"the importer crashed: {tail}", time.monotonic() - started


def import_here(fmt: str, label: str, path: Path, dest: Path, timeout: float) -> tuple[str, str, float]:
    """import_one in this process (no child's start-up per file: KernelBench's 250 files), SIGALRM as the limit."""
    from ksci.importers.gpumode_probe import Expired
    from ksci.importers.kernelbench import import_kernelbench

    started = time.monotonic()

    def alarm(signum, frame):
        raise Expired  # a BaseException: the importer's `except Exception` does not swallow it

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        result = import_kernelbench(path, _name(label), dest, replace=True)
    except Expired:
        return "refused", f"timeout: the import took over {timeout:.0f} s", time.monotonic() - started
    except Exception as exc:
        return "error", f"the importer crashed: {type(exc).__name__}: {exc}"[:300], time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    verdict = ("refused", str(result)) if hasattr(result, "construct") else ("imported", "")
    return *verdict, time.monotonic() - started


def run_source(
    fmt: str, items: list[tuple[str, Path]], dest: Path, timeout: float, jobs: int, here: bool = False
) -> list[tuple]:
    def one(item):
        label, path = item
        run = import_here if here else import_one
        verdict, reason, seconds = run(fmt, label, path, dest, timeout)
        print(f"  {label}: {verdict} {reason} ({seconds:.0f} s)", file=sys.stderr, flush=True)
        return label, verdict, reason, seconds

    if here:  # SIGALRM: the main thread
        return [one(item) for item in items]
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, items))


def print_table(title: str, commit: str, rows: list[tuple]) -> None:
    imported = sum(r[1] == "imported" for r in rows)
    print(f"\n## {title} (commit {commit})\n")
    print("| task | result | reason | s |\n|---|---|---|---|")
    for label, verdict, reason, seconds in rows:
        print(f"| {label} | {verdict} | {reason.replace('|', '/')} | {seconds:.0f} |")
    print(f"\n{title}: {imported} of {len(rows)} imported, {len(rows) - imported} refused", flush=True)


def commit_of(checkout: Path, given: str | None) -> str:
    """--commit's value, else the checkout's git HEAD (a copy that is no work tree: "unknown")."""
    if given:
        return given
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpumode", type=Path, help="a reference-kernels checkout (its problems/ folder)")
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (KernelBench/level1..3)")
    parser.add_argument("--only", nargs="*", help="these task labels only (as the table names them)")
    parser.add_argument("--gpumode-commit", help="the commit of --gpumode, where it is a copy, not a git work tree")
    parser.add_argument("--kernelbench-commit", help="the commit of --kernelbench, likewise")
    parser.add_argument("--every", type=int, default=1, help="every Nth item only (a sample; default: all)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per import (default 180)")
    parser.add_argument("--jobs", type=int, default=1, help="imports at once (default 1)")
    parser.add_argument("--dest", type=Path, help="where the imported folders go (default: a temporary folder)")
    parser.add_argument(
        "--kernelbench-in-process", action="store_true", help="KernelBench files in this process, one at a time"
    )
    args = parser.parse_args()
    dest = args.dest or Path(tempfile.mkdtemp(prefix="ksci-corpus-"))
    sources = [("gpumode", args.gpumode, gpumode_tasks), ("kernelbench", args.kernelbench, kernelbench_files)]
    for fmt, checkout, lister in sources:
        if checkout is None:
            continue
        items = [i for i in lister(checkout) if not args.only or i[0] in args.only][:: args.every]
        here = fmt == "kernelbench" and args.kernelbench_in_process
        if here:
            os.environ["KSCI_KERNELS_DIR"] = str(dest / fmt)
            sys.path.insert(0, str(ROOT))
        rows = run_source(fmt, items, dest / fmt, args.timeout, 1 if here else args.jobs, here)
        print_table(f"{fmt} {checkout}", commit_of(checkout, getattr(args, f"{fmt}_commit")), rows)
    print(f"\nimported folders: {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
