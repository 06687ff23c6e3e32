"""Issue 27: the report's lineage graph and best-so-far plot stay legible at 10 generations of 12 candidates.

A test stand-in's made-up 10 x 12 run (tests/support/synthetic_lineage.py) is rendered in headless Chromium; the
plots are inline SVG with their text as text, so the page itself says where each label landed: the boxes of the
text elements (getBoundingClientRect, as drawn with the browser's fonts) of each plot must not meet. The screenshot
of the plots is kept (KSCI_REPORT_SCREENSHOTS=DIR copies it there) for a person to look at.
"""

from __future__ import annotations

import base64
import itertools
import os
import shutil
from pathlib import Path

import pytest
from cdp import Page
from support.synthetic_lineage import write_synthetic_run

from ksci.lineage.store import LineageStore
from ksci.report.html import build_report

pytestmark = pytest.mark.chromium

# Each plot's text boxes, in CSS pixels of the page, with the text they hold.
_BOXES = """(() => Object.fromEntries([...document.querySelectorAll('svg.plot')].map(svg => [svg.id,
  [...svg.querySelectorAll('text')].map(t => { const r = t.getBoundingClientRect();
    return {text: t.textContent, left: r.left, top: r.top + scrollY, right: r.right, bottom: r.bottom + scrollY}; })
  .filter(b => b.right > b.left)])))()"""
_AREA = """(() => { const a = document.getElementById('progress').getBoundingClientRect();
  const b = document.getElementById('plot-lineage').getBoundingClientRect();
  return {x: 0, y: a.top + scrollY, width: innerWidth, height: b.bottom - a.top, scale: 1}; })()"""


def overlaps(boxes: list[dict], tolerance_px: float = 0.5) -> list[tuple[str, str]]:
    """The pairs of text boxes that meet by more than `tolerance_px` in both directions."""
    found = []
    for a, b in itertools.combinations(boxes, 2):
        wide = min(a["right"], b["right"]) - max(a["left"], b["left"])
        high = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
        if wide > tolerance_px and high > tolerance_px:
            found.append((a["text"], b["text"]))
    return found


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = write_synthetic_run(tmp_path_factory.mktemp("store"), "stand-in-10x12", 10, 12, simulated=True)
    store = LineageStore(root)
    page = tmp_path_factory.mktemp("page") / "report.html"
    page.write_text(build_report(store.read("stand-in-10x12"), store.read_source))
    return page


def test_the_check_sees_labels_that_meet():
    boxes = [{"text": "a", "left": 0, "top": 0, "right": 10, "bottom": 10}]
    assert overlaps([*boxes, {"text": "b", "left": 9, "top": 9, "right": 20, "bottom": 20}]) == [("a", "b")]
    assert overlaps([*boxes, {"text": "c", "left": 10, "top": 0, "right": 20, "bottom": 10}]) == []


def test_no_label_of_a_10_by_12_report_meets_another(report, tmp_path):
    with Page(tmp_path / "profile", size=(1400, 1000)) as page:
        page.open(report.as_uri())
        page.wait_for("document.readyState === 'complete' && document.querySelectorAll('svg.plot').length", 60, "plots")
        boxes = page.evaluate(_BOXES)
        shot = page.send("Page.captureScreenshot", format="png", clip=page.evaluate(_AREA), captureBeyondViewport=True)
    png = tmp_path / "report-10x12.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    if os.environ.get("KSCI_REPORT_SCREENSHOTS"):
        shutil.copy(png, Path(os.environ["KSCI_REPORT_SCREENSHOTS"]) / png.name)
    assert png.stat().st_size > 50_000  # the two plots were drawn
    lineage = boxes["plot-lineage"]
    assert sum(b["text"].endswith(" µs") for b in lineage) == 100  # every passing candidate's time is shown
    assert sum(len(b["text"]) == 8 and b["text"].isalnum() for b in lineage) >= 120  # and every short id
    for plot in ("plot-progress", "plot-lineage", "plot-shapes", "plot-failures"):
        assert overlaps(boxes[plot]) == [], plot
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
