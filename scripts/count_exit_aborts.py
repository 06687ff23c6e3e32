"""How often a process that appended to a lineage store aborts at exit (SIGABRT): rounds of four writers at once,
as tests/test_lineage.py's concurrent-append test starts them. Prints the exit codes counted. CPU only.

    python scripts/count_exit_aborts.py --rounds 250      # 1000 writer processes, about 6 minutes on 2 cores

Before ksci.lineage.store.read_part stopped using pq.read_table, 6 of 1000 exits were -6 (2026-11-21, this machine).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=250)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from test_lineage import _append_many

    context = multiprocessing.get_context("spawn")
    codes: collections.Counter = collections.Counter()
    started = time.monotonic()
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as folder:
            workers = [context.Process(target=_append_many, args=(Path(folder).as_uri(), w)) for w in range(4)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(120)
            codes.update(w.exitcode for w in workers)
    print(f"{sum(codes.values())} writer exits in {time.monotonic() - started:.0f} s; exit codes: {dict(codes)}")


if __name__ == "__main__":
    main()
