"""The order in which `make test`'s workers take the test files: the longest first.

`make test` runs pytest-xdist with --dist loadfile (a file's tests in one process, so its module fixtures run once)
and --no-loadscope-reorder, which hands the files out in collection order, the order set here. xdist's own order
(files with the most tests first) put the few-test files that start Prefect servers, workers and browsers last,
where one of them kept the run going for minutes with the other workers idle. Largest first is the classic rule
for spreading jobs of known lengths over a few machines: the short files then fill the gaps at the end."""

from __future__ import annotations

import pytest

# Files measured as the longest, longest first (seconds of one file run alone on 2 busy cores). A file not named
# here follows them: first those with a test marked `slow`, then the rest, each in collection order.
LONGEST_FIRST = (
    "test_multi_worker_postgres.py",
    "test_multi_worker.py",
    "test_generation_retry.py",
    "test_faults.py",
    "test_deployment.py",
    "test_evolve_terminal.py",
    "test_prefect_ui.py",
    "test_no_host_file_leaks.py",
    "test_llm_secrets.py",
    "test_console_stop.py",
)


def longest_files_first(items: list[pytest.Item]) -> None:
    """Sort `items` in place by file, longest files first; a file's own tests keep their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    slow_files = {item.path.name for item in items if "slow" in item.keywords}

    def key(item: pytest.Item) -> int:
        name = item.path.name
        if name in rank:
            return rank[name]
        return len(rank) + (0 if name in slow_files else 1)

    items.sort(key=key)
