"""The catch table (benchmarks/catch_table.py, docs/threat-model.md): every row names an adversarial kernel that
exists and says what it plays and what catches it; the screen lets through the ones meant to reach the GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ksci.evaluate.screen.source import screen_source

ROOT = Path(__file__).resolve().parent.parent
ADVERSARIAL = ROOT / "kernels" / "fp8_gemm" / "solutions" / "adversarial"
sys.path.insert(0, str(ROOT / "benchmarks"))

from catch_table import CATCH_TABLE, print_catch_table  # noqa: E402


@pytest.mark.parametrize("stem", [row[2] for row in CATCH_TABLE])
def test_each_row_is_a_kernel_with_a_header_and_the_screen_decides_as_it_expects(stem):
    lines = (ADVERSARIAL / f"{stem}.cu").read_text().splitlines()
    expected = set(lines[0].removeprefix("// expect: ").split("|"))
    assert lines[1].startswith("// unscreened: ")
    header = " ".join(line for line in lines[:16] if line.startswith("//"))
    assert "Plays " in header and "Caught by:" in header
    screened = screen_source((ADVERSARIAL / f"{stem}.cu").read_text())
    assert screened.ok == ("rejected" not in expected), screened.message


def test_the_table_is_in_the_threat_model_and_prints_the_measured_verdicts(capsys):
    doc = (ROOT / "docs" / "threat-model.md").read_text()
    assert all(f"`{stem}`" in doc for _, _, stem, _ in CATCH_TABLE)
    print_catch_table({"shape_table": {"wrong"}}, {"shape_table": "ok"})
    out = capsys.readouterr().out
    assert "measured" in out and "UNEXPECTED" in out.splitlines()[2]
