"""A TEST STAND-IN: a made-up lineage of G generations of N candidates, written to a LineageStore, for the report's
legibility and labelling tests (no GPU, no Prefect, a second to build).

Nothing here was measured. The rows look like a tuning run's (templates, parameters, parents in the previous
generation, hypotheses of the tuning proposer's length, a few failures of each kind, per-shape times), so that the
report has as much to draw as a real 10 x 12 run would: the crowding issue 27 saw at 8 generations of 8 is what
these rows are for. `simulated=True` marks them as the GPU simulator's (its GPU name and toolchain), as rows of
`ksci evolve --simulate` are; False leaves them looking measured on an H200.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ksci.backends.simulated import SIMULATED_GPU
from ksci.lineage.store import Candidate, LineageStore, candidate_id_of

SHAPES = ["1024x1536x7168", "1024x4096x512", "2048x2048x2048", "4096x7168x2048", "128x7168x16384", "512x512x7168"]
FAILURES = ["compile_error", "wrong", "runtime_error", "timeout"]
REFERENCE_US, VENDOR_US, SOL_US = 1000.0, 50.0, 30.0


def synthetic_rows(run: str, generations: int, children: int, *, simulated: bool, seed: int = 7) -> list[tuple]:
    """(Candidate without source_path, kernel source) pairs, generation by generation."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    rows, previous = [], []
    for generation in range(generations):
        current = []
        for index in range(children):
            parent = rng.choice(previous) if previous else None
            params = {"BM": rng.choice([64, 128, 256]), "BN": rng.choice([64, 128, 144]), "STAGES": rng.randint(1, 5)}
            source = (
                f"// test stand-in {run} g{generation} c{index}\n// {json.dumps(params)}\n__global__ void k() {{}}\n"
            )
            status = FAILURES[(generation + index) % len(FAILURES)] if index % 5 == 4 else "ok"
            base = parent[0].geomean_us if parent and parent[0].geomean_us else 400.0
            geomean = max(60.0, base * rng.uniform(0.75, 1.15)) if status == "ok" else None
            hypothesis = (
                f"mma: BM {rng.choice([64, 128])} -> {params['BM']} (neighbour of parent "
                f"{parent[0].candidate_id if parent else '-'}, geomean {base:.1f} us)"
                if parent
                else f"mma: default {params}; family never tried"
            )
            row = _row(run, generation, source, parent, params, status, geomean, hypothesis, simulated)
            row.created_at = start + timedelta(minutes=generation * 3 + index / 10)
            current.append((row, source))
        rows += current
        previous = [pair for pair in current if pair[0].status == "ok"] or previous
    return rows


def _row(run, generation, source, parent, params, status, geomean, hypothesis, simulated) -> Candidate:
    ok = geomean is not None
    fingerprint = {"gpu": SIMULATED_GPU, "toolchain": "simulator"} if simulated else {"gpu": "NVIDIA H200"}
    return Candidate(
        run=run,
        problem="fp8_gemm",
        generation=generation,
        candidate_id=candidate_id_of(source),
        parent_id=parent[0].candidate_id if parent else None,
        proposer="tuning" if parent else "seed",
        hypothesis=hypothesis,
        template="mma",
        params_json=json.dumps(params, sort_keys=True),
        kind="point",
        source_path="",
        target="cuda",
        arch="simulated" if simulated else "sm_90a",
        status=status,
        message="simulated: made-up timing" if simulated else "",
        geomean_us=geomean,
        reference_geomean_us=REFERENCE_US if ok else None,
        vendor_geomean_us=VENDOR_US if ok else None,
        speed_of_light_geomean_us=None if simulated or not ok else SOL_US,
        speedup_vs_reference=REFERENCE_US / geomean if ok else None,
        speedup_vs_vendor=VENDOR_US / geomean if ok else None,
        shape_times_json=json.dumps({s: geomean * (0.5 + i / 5) for i, s in enumerate(SHAPES)}) if ok else "{}",
        gpu=SIMULATED_GPU if simulated else "NVIDIA H200",
        fingerprint_json=json.dumps(fingerprint),
    )


def write_synthetic_run(root: Path, run: str, generations: int = 10, children: int = 12, *, simulated: bool) -> Path:
    """The stand-in run written to a LineageStore at `root` (sources included); returns the root."""
    store = LineageStore(root)
    rows = []
    for row, source in synthetic_rows(run, generations, children, simulated=simulated):
        row.source_path = store.put_source(source, ".cu")
        rows.append(row)
    store.append(rows)
    return root
