"""benchmarks/tuning_throughput.py's accounting of GPU windows, on made-up lineage rows: a candidate verified and timed
in one harness run (tasks.evaluation.verify_and_benchmark) has one window, and counts once as a candidate on the GPU;
rows of the code before (a verify window and a benchmark window each) are still read as they were."""

from __future__ import annotations

import json

import pandas as pd
from support.benchmark_scripts import load_benchmark


def _script():
    return load_benchmark("tuning_throughput")


def _window(phases, start, end, started=0.25, result=None, exited=None):
    w = {"phases": phases, "start": start, "end": end, "device": "0", "started_s": started}
    if result is not None:
        w["result_s"], w["exited_s"] = result, exited
    return w


def _rows(fingerprints) -> pd.DataFrame:
    return pd.DataFrame({"fingerprint_json": [json.dumps(f) for f in fingerprints]})


def test_one_window_a_candidate_counts_the_candidate_once_and_its_seconds_once():
    tt = _script()
    baselines = _window(["baselines"], 0.0, 1.5)
    rows = _rows(
        [
            {
                "gpu_window": _window(["verify", "benchmark"], 2.0, 4.0, result=1.8, exited=2.1),
                "baselines_gpu_window": baselines,
            },
            {
                "gpu_window": _window(["verify", "benchmark"], 4.0, 6.5, result=2.3, exited=2.6),
                "baselines_gpu_window": baselines,
            },
        ]
    )
    windows = tt.windows_of(rows)
    assert windows["verify"] == [] and windows["benchmark"] == []
    assert [w[:2] for w in windows["verify+benchmark"]] == [(2.0, 4.0), (4.0, 6.5)]
    assert len(windows["baselines"]) == 1  # named by both rows, counted once
    medians = {kind: tt._median([w[1] - w[0] for w in ws]) for kind, ws in windows.items()}
    assert medians["verify+benchmark"] == 2.25
    assert tt._one_window(
        medians, {"verify+benchmark": 0.25}, {"verify+benchmark": 0.2}, {"verify+benchmark": 0.3}
    ) == ("2.25 / 0.25 / 0.20 / 0.30")


def test_rows_of_the_two_window_harness_are_read_as_before():
    tt = _script()
    rows = _rows(
        [
            {"verify_gpu_window": _window(["verify"], 0.0, 1.0), "gpu_window": _window(["benchmark"], 1.0, 3.0)},
            {"verify_gpu_window": _window(["verify"], 3.0, 4.1), "gpu_window": _window(["benchmark"], 4.1, 6.0)},
        ]
    )
    windows = tt.windows_of(rows)
    assert len(windows["verify"]) == 2 and len(windows["benchmark"]) == 2 and windows["verify+benchmark"] == []
    assert tt._one_window({"verify": 1.0}, {}, {}, {}) == "-"
