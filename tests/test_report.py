"""The evolution report and `ksci status`, on the lineage of a real run (fp8_gemm on an H200) committed in docs/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import screenshot
from matplotlib.image import imread

from ksci.cli import main
from ksci.lineage.store import LineageStore
from ksci.report.facts import faster_than_parent, new_bests
from ksci.report.html import build_report
from ksci.report.lineage_graph import plot_lineage
from ksci.report.plots import shape_speedups
from ksci.report.status import format_status

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "docs" / "examples" / "fp8_gemm-h200-run"
RUN = "gpu-h200"
BEST = "6d326448dbd54907"  # BM 128 -> 64 on 20289224c553ce81, the only new best after the seeds


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return LineageStore(STORE).read(RUN)


@pytest.fixture(scope="module")
def page(frame) -> str:
    return build_report(frame, LineageStore(STORE).read_source)


def test_the_example_run_is_what_the_tests_expect(frame):
    assert len(frame) == 20 and frame["generation"].nunique() == 5
    assert [r["candidate_id"] for r in new_bests(frame)] == [BEST]
    assert BEST in {r["candidate_id"] for r in faster_than_parent(frame)}


def test_the_page_has_a_row_per_candidate_and_a_headline(frame, page):
    for _, row in frame.iterrows():
        assert f'<tr id="c-{row["candidate_id"]}-{row["generation"]}"' in page
    assert page.count("<tr id=") == len(frame)
    headline = page[page.index('class="headline"') : page.index("<nav>")]
    assert BEST in headline and "234.6 µs" in headline and "4.26x faster" in headline and "4.93x slower" in headline
    assert "1.02x faster</b><span>than the best seed" in headline and "to 234.6 µs, 1.02x faster;" in headline
    assert "% faster" not in headline and "on its parent)" not in headline  # one convention of gains
    assert "its geomean varied by 0.4%" in headline  # a measured run states its noise
    assert "mma: BM 128 -&gt; 64" in headline  # the hypothesis that produced the best, escaped


def test_the_page_has_its_plots_inline(page):
    """Four plots as inline SVG with their text as text (searchable, measurable), none marked simulated here."""
    plots = re.findall(r'<svg class="plot" id="plot-(\w+)".*?</svg>', page, flags=re.S)
    assert plots == ["progress", "lineage", "shapes", "failures"] and "<img" not in page
    lineage = page[page.index('id="plot-lineage"') :].split("</svg>")[0]
    assert f"{BEST[:8]}</text>" in lineage and "234.6 µs</text>" in lineage
    assert "simulated" not in page.split("</style>")[1]  # a measured run


def test_the_page_diffs_each_new_best_against_its_parent(page):
    diffs = page[page.index('id="diffs"') :]
    assert "--- sources/20/20289224c553ce81.cu" in diffs and "+++ sources/6d/6d326448dbd54907.cu" in diffs
    assert '<span class="del">-constexpr int BM = 128;</span>' in diffs
    assert '<span class="add">+constexpr int BM = 64;</span>' in diffs


def test_the_page_loads_nothing_from_the_network(page):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"@import|url\((?!#)", page, re.IGNORECASE)  # url(#id): a clip path of a plot
    assert "http://" not in page and "https://" not in page


def test_text_from_the_lineage_is_escaped(frame):
    hostile = frame.copy()
    hostile.loc[0, "hypothesis"] = "<script>alert(1)</script>"
    page = build_report(hostile, LineageStore(STORE).read_source)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_heatmap_compares_each_shape_with_the_best_seed_on_it(frame):
    table = shape_speedups(frame)
    assert table.shape == (16, 18)  # passing candidates x benchmark shapes
    seeds = table[table.index.str.startswith("g0 ")]
    assert np.allclose(seeds.max(), 1.0)  # on every shape, one seed is the yardstick itself


def test_a_run_where_nothing_passed_still_makes_a_page(frame):
    failed = frame.assign(status="compile_error", geomean_us=np.nan, shape_times_json="{}")
    page = build_report(failed, LineageStore(STORE).read_source)
    assert "No candidate passed" in page and page.count("<tr id=") == len(frame)
    assert plot_lineage(failed).startswith("<svg")
    assert "no candidate passed" in format_status(failed, RUN)


def test_status_prints_generations_and_the_best(frame):
    text = format_status(frame, RUN)
    lines = text.splitlines()
    assert lines[0].startswith("run gpu-h200: fp8_gemm on NVIDIA H200 (sm_90a), 20 candidates in 5 generations")
    assert re.match(r"\s+3\s+4\s+2\s+2\s+234\.55\s+234\.55\s+6d326448dbd54907$", lines[5])
    assert f"best: {BEST}" in text and "4.26x faster than the reference" in text
    assert "4.93x slower than the vendor library" in text and "34.31x faster than the slowest seed" in text


def test_the_cli_writes_the_report_and_prints_the_status(tmp_path, capsys):
    output = tmp_path / "report.html"
    assert main(["report", "--run", RUN, "--store", str(STORE), "-o", str(output)]) == 0
    assert output.read_text().startswith("<!DOCTYPE html>")
    assert main(["status", "--run", RUN, "--store", str(STORE)]) == 0
    assert f"best: {BEST}" in capsys.readouterr().out
    assert main(["status", "--run", "no-such-run", "--store", str(STORE)]) == 2
    assert "runs there: gpu-h200" in capsys.readouterr().err


@pytest.mark.chromium
def test_the_report_renders_in_a_browser(page, tmp_path):
    html, png = tmp_path / "report.html", tmp_path / "report.png"
    html.write_text(page)
    done = screenshot(html.as_uri(), png, tmp_path / "profile")
    assert png.is_file(), done.stderr[-2000:]
    assert png.stat().st_size > 20_000
    pixels = imread(png)
    assert pixels.shape[:2] == (3000, 1400)
    assert pixels[..., :3].std() > 0.05  # not one flat colour: text, plots and table were drawn
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_a_composed_candidate_shows_its_points_and_the_shapes_each_serves(frame):
    """A composed row (kind composed, params_by_shape_json) reads "composed of N points", with the mapping in a
    details cell; rows of the example, written before the column existed, read as before."""
    points = frame[frame["template"] == "mma"].iloc[:2]
    first, second = ({"template": "mma", "params": json.loads(p)} for p in points["params_json"])
    shapes = sorted(json.loads(frame["shape_times_json"].iloc[0]))
    plan = {"default": first, "shapes": {k: second if i % 2 else first for i, k in enumerate(shapes)}}
    composed = frame.iloc[[0]].assign(
        candidate_id="c" * 16, template=None, params_json=None, kind="composed", params_by_shape_json=json.dumps(plan)
    )
    page = build_report(pd.concat([frame, composed], ignore_index=True), LineageStore(STORE).read_source)
    row = page[page.index(f'<tr id="c-{"c" * 16}') :].split("</tr>")[0]
    assert "<td>composed of 2 points</td>" in row and f"{len(shapes)} shapes → 2 points" in row
    assert "(default)" in row and shapes[1] in row.split("</li>")[1] and shapes[0] in row.split("</li>")[0]
    assert "<td>mma</td>" in page  # the other rows still name their template
