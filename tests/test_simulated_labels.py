"""Issue 27: every number a simulated run prints or reports is marked as simulated, in one convention of gains.

The check (`unmarked`): a line of text, or a block of the report's page (a paragraph, a list item, a tile, a
heading), that shows a number of the run (a time in us or µs, a ratio such as 1.05x or 11.72×, a percentage, a
decimal such as a table's 85.35; not the seconds a step took on this machine) must say "simulated" or "(sim)"; a table must say "simulated" in its head; a plot
must carry "simulated" in its own text. The measured example run is the control: the same check finds its
numbers unmarked, so the check is no assertion that passes on anything.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.shared_api import with_shared_api
from support.synthetic_lineage import write_synthetic_run

from ksci.lineage.store import LineageStore
from ksci.report.html import build_report
from ksci.report.status import format_status
from ksci.report.summary import format_evolution
from ksci.report.wording import SIMULATED_NOTE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "fp8_gemm-h200-run"  # a measured run (tests/test_report.py)
# Seconds ("done in 48.6 s") are this machine's wall-clock time, measured even in a simulated run: not a number of it.
NUMBER = re.compile(r"\d\s*(?:µs|us)\b|\d(?:\.\d+)?\s*[x×](?!\w)|\d\s*%|\d\.\d+(?!\d|\s*s\b)")
MARK = re.compile(r"\bsimulated\b|\(sim\)")
BLOCK = re.compile(r"</?(?:p|li|ul|ol|div|h[1-6]|nav|main|body|details|summary)\b[^>]*>", re.I)


def unmarked(text: str) -> list[str]:
    """The lines of `text` that show a number of the run without saying it is simulated."""
    return [line for line in text.splitlines() if NUMBER.search(line) and not MARK.search(line)]


def unmarked_in_page(page: str) -> list[str]:
    """What of the report's page shows a number without the mark: plots without it in their text, tables without
    it in their head, and blocks of the rest (stripped of tags) with a number and no mark."""
    page = re.sub(r"<head>.*?</head>", "", page, flags=re.S)
    page = re.sub(r'<pre class="diff">.*?</pre>', "", page, flags=re.S)  # kernel sources, not numbers of the run
    found = []
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        texts = " ".join(re.findall(r"<text\b[^>]*>([^<]*)</text>", svg))
        if NUMBER.search(texts) and not MARK.search(texts):
            found.append(f"a plot: {texts[:200]}")
    for table in re.findall(r"<table\b.*?</table>", page, flags=re.S):
        head, body = table.split("</thead>", 1)
        if NUMBER.search(_text(body)) and not MARK.search(_text(head)):
            found.append(f"a table headed {_text(head)!r}")
    rest = re.sub(r"<svg\b.*?</svg>|<table\b.*?</table>", "\n", page, flags=re.S)
    return found + unmarked(_text(BLOCK.sub("\n", rest)))


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


@pytest.fixture(scope="module")
def simulated_store(tmp_path_factory) -> Path:
    """A test stand-in's made-up 3 x 5 run, its rows marked as the GPU simulator's (tests/support)."""
    return write_synthetic_run(tmp_path_factory.mktemp("sim"), "sim", 3, 5, simulated=True)


def test_the_check_finds_the_numbers_of_a_measured_run():
    frame = LineageStore(EXAMPLE).read("gpu-h200")
    assert len(unmarked(format_status(frame, "gpu-h200"))) >= 7  # the table's rows and the best's lines
    page = build_report(frame, LineageStore(EXAMPLE).read_source)
    found = unmarked_in_page(page)
    assert sum(f.startswith("a plot") for f in found) == 3 and sum(f.startswith("a table") for f in found) == 1
    assert any("4.26x faster than the reference" in f for f in found)
    assert any("234.6 µs" in f for f in found)  # the best's tile


def test_status_marks_every_number_of_a_simulated_run(simulated_store):
    text = format_status(LineageStore(simulated_store).read("sim"), "sim")
    assert unmarked(text) == [], text
    assert "on the GPU simulator for cuda (simulated timings, not measured)" in text.splitlines()[0]
    assert re.search(r"\d+\.\d\dx (faster|slower) than the reference", text)


def test_the_page_of_a_simulated_run_marks_every_number(simulated_store):
    store = LineageStore(simulated_store)
    page = build_report(store.read("sim"), store.read_source)
    assert unmarked_in_page(page) == []
    assert '<p class="simulated">Simulated run:' in page
    assert page.count('<div class="card"><em>simulated</em>') >= 3  # the time, the reference, the vendor
    assert "re-timed" not in page and "of the speed of light" not in page  # no noise, no speed of light claimed
    words = _text(re.sub(r"<style>.*?</style>|<svg\b.*?</svg>", "", page, flags=re.S))
    assert not re.search(r"\d%|on its parent\)", words)  # gains as 1.05x faster / 1.70x slower only
    assert re.search(r"\d\.\d\dx (faster|slower) than its parent", words)


def test_the_end_of_run_summary_marks_every_number(simulated_store):
    frame = LineageStore(simulated_store).read("sim")
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")  # as the flow's records: None, not NaN
    counts = {"compiled": 5, "compile_cache_hits": 0, "benchmarked": 5, "benchmark_cache_hits": 0}
    summaries = [
        {"run": "sim", "generation": g, "candidates": 5, **counts, "rows": [r for r in rows if r["generation"] == g]}
        for g in range(3)
    ]
    text = format_evolution(summaries, str(simulated_store))
    assert unmarked(text) == [], text
    assert text.splitlines()[0].startswith("simulated run: its times and ratios were made up")


def ksci(*args: str, api: str | None = None) -> subprocess.CompletedProcess:
    """`ksci ARGS`; with `api`, on that Prefect API (the test process's shared one) instead of an embedded one."""
    command, env = [sys.executable, "-m", "ksci.cli", *args], dict(os.environ)
    env = with_shared_api(env, api) if api else env
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)


@pytest.mark.slow
def test_a_simulated_evolution_marks_every_number_it_prints_and_reports(tmp_path, shared_prefect_api):
    """`ksci evolve --simulate` (2 generations of 3, made-up timings), then `ksci status` and `ksci report` on it."""
    store = str(tmp_path / "store")
    evolve = ksci("evolve", "--problem", "fp8_gemm", "--simulate", "--generations", "2", "--children", "3",
                  "--run", "sim", "--store", store, api=shared_prefect_api)  # fmt: skip
    assert evolve.returncode == 0, evolve.stderr[-3000:]
    assert "x faster than the reference" in evolve.stdout and unmarked(evolve.stdout) == [], evolve.stdout
    assert evolve.stdout.splitlines()[-4:] == _next_steps("sim", store)
    log = (tmp_path / "store" / "sim" / "evolve.log").read_text()
    assert "Beginning flow run" in log and "View at http" not in log  # no link to a server that is gone
    status = ksci("status", "--run", "sim", "--store", store)
    assert status.returncode == 0 and "simulated geomean" in status.stdout
    assert unmarked(status.stdout) == [], status.stdout
    report = tmp_path / "report.html"
    assert ksci("report", "--run", "sim", "--store", store, "-o", str(report)).returncode == 0
    assert unmarked_in_page(report.read_text()) == []


def _next_steps(run: str, store: str) -> list[str]:
    return [
        "next steps:",
        f"  ksci status --run {run} --store {store}    its generations and best kernels",
        f"  ksci report --run {run} --store {store}    an HTML report of the run",
        f"  log: {store}/{run}/evolve.log",
    ]


@pytest.mark.slow
def test_a_quiet_evolution_ends_with_its_summary_and_the_next_steps(tmp_path, shared_prefect_api):
    store = str(tmp_path / "store")
    evolve = ksci("evolve", "--problem", "fp8_gemm", "--simulate", "--generations", "1", "--children", "2",
                  "--run", "quiet", "--store", store, "--quiet", api=shared_prefect_api)  # fmt: skip
    assert evolve.returncode == 0, evolve.stderr[-3000:]
    lines = evolve.stdout.splitlines()
    assert lines[0] == SIMULATED_NOTE and lines[-4:] == _next_steps("quiet", store), evolve.stdout
    assert any(line.startswith("run quiet: best ") for line in lines) and evolve.stderr == ""
