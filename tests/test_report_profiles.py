"""The report's "What the profiler saw" (issue 29), on the lineage of the real H200 run committed in docs/ (as in
tests/test_report.py) with profiles recorded beside it: digests made by the real parser from the ncu CSV kept in
tests/data/profile/, a Base without a profile (its why shown, escaped), a generation with no record at all."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ksci.cli import main
from ksci.lineage.store import LineageStore
from ksci.profile import ncu
from ksci.profile.digest import digest
from ksci.profile.result import ProfileResult
from ksci.profile.store import read_profiles, record_profile
from ksci.report.html import build_report
from ksci.report.profiles import BEST_NOT_RECORDED, NOT_RECORDED

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "fp8_gemm-h200-run"
RUN = "gpu-h200"
BEST = "6d326448dbd54907"
DATA = ROOT / "tests" / "data" / "profile"


@pytest.fixture
def store(tmp_path) -> Path:
    """The example run copied, with profiles: generation 0's Base measured, generation 1's refused (a hostile
    why), the best kernel measured; generations 2-4 have none."""
    root = tmp_path / "store"
    shutil.copytree(EXAMPLE, root)
    frame = LineageStore(root).read(RUN)
    kernels = ncu.kernel_profiles(ncu.read_launches((DATA / "ncu_raw_handwritten_h100.csv").read_text()))
    measured = ProfileResult(True, "ncu", "2025.1", gpu="NVIDIA H200", shape={"m": 6144}, kernels=kernels, seconds=9.5)
    refused = ProfileResult(False, "ncu", "2025.1", why="<script>alert(1)</script> ERR_NVGPUCTRPERM", seconds=1.0)
    seed = frame[frame["generation"] == 0].iloc[0]["candidate_id"]
    record_profile(str(root), RUN, 0, seed, "base", measured, digest(measured, 4.8))
    record_profile(str(root), RUN, 1, seed, "base", refused, digest(refused))
    record_profile(str(root), RUN, 4, BEST, "best", measured, digest(measured, 4.8))
    return root


def _section(page: str) -> str:
    return page[page.index('id="profiles"') :].split("</main>")[0]


def test_the_report_shows_the_best_kernels_digest_and_each_generations_base(store):
    page = build_report(LineageStore(store).read(RUN), LineageStore(store).read_source, read_profiles(str(store), RUN))
    assert '<a href="#profiles">What the profiler saw</a>' in page
    section = _section(page)
    best = section[: section.index("Each generation")]
    assert f"<code>{BEST}</code>" in best and "profiled after generation 4, 9.5 s" in best
    assert "tensor pipe busy: 62.0%" in best and "dispatch_stall 1.48 (41%)" in best
    assert best.count('<pre class="digest">') == 1
    items = section[section.index('<ul class="profiles">') :]
    assert items.count("<li>") == 5  # one per generation of the run
    assert "generation 0, Base" in items and "roofline class: " in items
    assert "generation 1, Base" in items and "no profile: &lt;script&gt;alert(1)&lt;/script&gt;" in items
    assert "<script>" not in section
    for generation in (2, 3, 4):
        assert f"<li>generation {generation}: {NOT_RECORDED}</li>" in items


def test_a_run_without_profiles_says_no_profile_and_why(store):
    frame = LineageStore(store).read(RUN)
    section = _section(build_report(frame, LineageStore(store).read_source))
    assert html.escape(BEST_NOT_RECORDED) in section and section.count(NOT_RECORDED) == frame["generation"].nunique()
    assert '<pre class="digest">' not in section


def test_ksci_report_reads_the_runs_profiles(store, tmp_path):
    output = tmp_path / "report.html"
    assert main(["report", "--run", RUN, "--store", str(store), "-o", str(output)]) == 0
    section = _section(output.read_text())
    assert "tensor pipe busy: 62.0%" in section and f"<code>{BEST}</code>" in section


def test_a_digest_is_escaped_where_a_kernel_name_holds_markup(store):
    hostile = ProfileResult(True, "ncu", "2025.1", kernels=(ncu.KernelProfile("ncu", "k<img src=x>", 3),))
    record_profile(str(store), RUN, 2, BEST, "base", hostile, digest(hostile))
    frame: pd.DataFrame = LineageStore(store).read(RUN)
    section = _section(build_report(frame, LineageStore(store).read_source, read_profiles(str(store), RUN)))
    assert "k&lt;img src=x&gt;" in section and "<img" not in section
