"""How often a process that used a lineage store aborts at exit (SIGABRT, "terminate called without an active
exception"). Prints the exit codes counted. CPU only.

    python scripts/count_exit_aborts.py --rounds 250                   # four appending writers at once, as
                                                                       # tests/test_lineage.py starts them
    python scripts/count_exit_aborts.py --case full-disk --rounds 700  # an append that fails on a full disk, as
                                                                       # tests/test_faults.py's, 8 at once

Both counts found Arrow's threads at work when the interpreter exits (ksci.lineage.parts.read_part says how: a
core dump of a full-disk abort showed an IO thread holding a Python buffer). Before read_part stopped using
pq.read_table, 6 of 1000 writers' exits were -6 (2026-11-21); before it parsed the bytes from memory, 24 of 2,200
full-disk exits were, and 0 of 700 after (2026-12-02); each on a developer's machine without a GPU, like CI's.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def writers(rounds: int) -> collections.Counter:
    from test_lineage import _append_many

    context = multiprocessing.get_context("spawn")
    codes: collections.Counter = collections.Counter()
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            workers = [context.Process(target=_append_many, args=(Path(folder).as_uri(), w)) for w in range(4)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(120)
            codes.update(w.exitcode for w in workers)
    return codes


def full_disk(rounds: int) -> collections.Counter:
    from support.full_disk import append_on_a_full_disk, rows

    from ksci.lineage.store import LineageStore

    def one(_: int) -> int:
        with tempfile.TemporaryDirectory() as folder:
            LineageStore(Path(folder) / "store").append(rows(3))
            return append_on_a_full_disk(Path(folder) / "store").returncode

    with ThreadPoolExecutor(8) as pool:
        return collections.Counter(pool.map(one, range(rounds)))


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=["writers", "full-disk"], default="writers")
    parser.add_argument("--rounds", type=int, default=250)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    started = time.monotonic()
    codes = writers(args.rounds) if args.case == "writers" else full_disk(args.rounds)
    print(f"{sum(codes.values())} exits in {time.monotonic() - started:.0f} s; exit codes: {dict(codes)}")


if __name__ == "__main__":
    main()
