"""The profiles a run took, kept in its store: one JSON file per (generation, candidate) under <run>/profiles/,
written once (no append to race on), with the digest the LLM was shown, why there was none, and what it cost.
`ksci status` and the report read them back (profile_seconds_by_generation, read_profiles)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ksci.lineage.parts import check_run
from ksci.lineage.storage import Storage
from ksci.profile.result import ProfileResult


@dataclass(frozen=True)
class ProfileRecord:
    generation: int
    candidate_id: str
    role: str  # "base" (the selector's Base) or "best" (the run's best)
    ok: bool
    tool: str
    version: str
    why: str
    gpu: str
    shape: dict
    seconds: float
    digest: str


def record_profile(
    store_root: str, run: str, generation: int, candidate_id: str, role: str, result: ProfileResult, digest: str
) -> ProfileRecord:
    check_run(run)
    record = ProfileRecord(
        generation, candidate_id, role, result.ok, result.tool, result.version, result.why, result.gpu,
        dict(result.shape), round(result.seconds, 3), digest,
    )  # fmt: skip
    storage = Storage(store_root)
    path = storage.path(run, "profiles", f"g{generation:04d}-{role}-{candidate_id}.json")
    storage.write_atomic(path, lambda f: f.write(json.dumps(asdict(record), indent=1).encode()))
    return record


def read_profiles(store_root: str, run: str) -> list[ProfileRecord]:
    """Every profile the run recorded, by generation; a file that does not read is left out."""
    storage = Storage(store_root)
    records = []
    for path in storage.files(storage.path(run, "profiles"), "g*.json"):
        try:
            records.append(ProfileRecord(**json.loads(storage.read_bytes(path))))
        except (ValueError, TypeError):
            continue
    return sorted(records, key=lambda r: (r.generation, r.role, r.candidate_id))


def base_profile(store_root: str, run: str, generation: int) -> ProfileRecord | None:
    """The profile of the Base the selector chose for `generation` (what its designer and writer were shown), None
    when the generation took none (a seeded generation, a run without a profile step)."""
    bases = [r for r in read_profiles(store_root, run) if r.generation == generation and r.role == "base"]
    return bases[-1] if bases else None


def profile_seconds_by_generation(store_root: str, run: str) -> dict[int, float]:
    """What profiling cost each generation, in seconds of profiler time."""
    totals: dict[int, float] = {}
    for record in read_profiles(store_root, run):
        totals[record.generation] = totals.get(record.generation, 0.0) + record.seconds
    return totals


def profiling_line(store_root: str, run: str) -> str | None:
    """`ksci status`'s line on profiling: seconds per generation and how many had no profile; None when none ran."""
    records = read_profiles(store_root, run)
    if not records:
        return None
    seconds = profile_seconds_by_generation(store_root, run)
    per_generation = ", ".join(f"gen {g}: {s:.1f} s" for g, s in sorted(seconds.items()))
    missing = [r for r in records if not r.ok]
    why = f"; {len(missing)} without a profile (last: {missing[-1].why})" if missing else ""
    return f"profiling: {per_generation}{why}"
