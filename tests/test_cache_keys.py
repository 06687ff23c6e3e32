"""The compile, verify and benchmark tasks' cache keys: what decides a verdict is in them, the GPU ids are not."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.prefect_harness import on_shared_api  # noqa: E402

import tasks.cache_keys as cache_keys  # noqa: E402
from flows.evolve import evolve  # noqa: E402
from ksci.backends import backend_of  # noqa: E402
from ksci.backends.simulated import Simulator  # noqa: E402
from ksci.evaluate.setup import EvaluationSetup  # noqa: E402
from ksci.lineage.store import LineageStore  # noqa: E402

RECORDING = Path(__file__).parent / "data" / "fp8_gemm_h200_recording.json"


def test_the_harness_hash_follows_every_harness_file(tmp_path, monkeypatch):
    copy = tmp_path / "ksci"
    shutil.copytree(cache_keys.KSCI, copy)
    monkeypatch.setattr(cache_keys, "KSCI", copy)
    before = cache_keys.harness_code_hash()
    compile_before = cache_keys.compile_code_hash()
    for name in (
        "evaluate/harness/check.py",
        "evaluate/judge/timing_rules.py",
        "evaluate/judge/report_schema.py",
        "evaluate/stage_order.py",
        "problem/roofline.py",
    ):
        path = copy / name
        path.write_text(path.read_text() + "\n# changed\n")
        assert cache_keys.harness_code_hash() != before, name
        before = cache_keys.harness_code_hash()
    (copy / "evaluate" / "new_check.py").write_text("# a new check\n")  # counted once it exists: keyed by folder
    assert cache_keys.harness_code_hash() != before and cache_keys.compile_code_hash() != compile_before
    before = cache_keys.harness_code_hash()
    (copy / "lineage" / "store.py").write_text("# not the harness\n")
    assert cache_keys.harness_code_hash() == before


@pytest.mark.parametrize(
    ("digest", "changed", "prose"),
    [
        ("problem_hash", ("reference.py", "problem.yaml"), "README.md"),
        (
            "template_hash",
            ("templates/cuda/wgmma_core.cu.j2", "templates/hip/mfma_fp8.hip.j2", "problem.yaml"),
            "knowledge.md",
        ),
    ],
)
def test_a_problem_hash_follows_its_files_not_the_prose(tmp_path, monkeypatch, digest, changed, prose):
    kernels = tmp_path / "kernels"
    shutil.copytree(Path(__file__).parent.parent / "kernels" / "fp8_gemm", kernels / "fp8_gemm")
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(kernels))
    hash_of = getattr(cache_keys, digest)
    before = hash_of("fp8_gemm")
    (kernels / "fp8_gemm" / prose).write_text("prose\n")
    assert hash_of("fp8_gemm") == before
    for name in changed:
        path = kernels / "fp8_gemm" / name
        path.write_text(path.read_text() + "\n# changed\n")
        assert hash_of("fp8_gemm") != before, name
        before = hash_of("fp8_gemm")


def test_the_proposer_hash_follows_the_proposer_code(tmp_path, monkeypatch):
    copy = tmp_path / "ksci"
    shutil.copytree(cache_keys.KSCI, copy)
    monkeypatch.setattr(cache_keys, "KSCI", copy)
    before, render = cache_keys.proposer_code_hash(), cache_keys.render_code_hash()
    tuning = copy / "proposers" / "optuna_search.py"
    tuning.write_text(tuning.read_text() + "\n# changed\n")
    assert cache_keys.proposer_code_hash() != before and cache_keys.render_code_hash() == render
    render_py = copy / "problem" / "render.py"
    render_py.write_text(render_py.read_text() + "\n# changed\n")
    assert cache_keys.render_code_hash() != render


def test_the_hipify_key_follows_the_conversions_code_and_the_converters(tmp_path, monkeypatch):
    copy = tmp_path / "ksci"
    shutil.copytree(cache_keys.KSCI, copy)
    monkeypatch.setattr(cache_keys, "KSCI", copy)
    policy = cache_keys.HipifyCode()
    before = policy.compute_key(None, {}, {})
    hipify_py = copy / "evaluate" / "toolchain" / "hipify.py"
    hipify_py.write_text(hipify_py.read_text() + "\n# changed\n")
    changed = policy.compute_key(None, {}, {})
    assert changed != before
    monkeypatch.setattr(cache_keys, "find_hipify", lambda: ["/usr/bin/hipify-perl"])
    assert policy.compute_key(None, {}, {}) != changed


@pytest.mark.parametrize("key", sorted(cache_keys.CODE_KEYS))
def test_every_code_pattern_of_every_key_matches_a_file(key):
    for pattern in cache_keys.CODE_KEYS[key]:
        assert any(p.is_file() for p in cache_keys.KSCI.glob(pattern)), f"{key}: ksci/{pattern} matches nothing"
    assert len(cache_keys.code_hash(cache_keys.CODE_KEYS[key])) == 64


def test_a_file_moved_into_a_keyed_folder_changes_the_key(tmp_path, monkeypatch):
    copy = tmp_path / "ksci"
    shutil.copytree(cache_keys.KSCI, copy)
    monkeypatch.setattr(cache_keys, "KSCI", copy)
    before = cache_keys.harness_code_hash()
    (copy / "cli.py").rename(copy / "evaluate" / "cli.py")  # outside every key before, in the harness's folder now
    assert cache_keys.harness_code_hash() != before


def test_a_pattern_that_matches_nothing_is_an_error_not_a_smaller_key(tmp_path, monkeypatch):
    copy = tmp_path / "ksci"
    shutil.copytree(cache_keys.KSCI, copy)
    monkeypatch.setattr(cache_keys, "KSCI", copy)
    shutil.rmtree(copy / "backends")
    with pytest.raises(cache_keys.UnmatchedPattern, match="backends"):
        cache_keys.harness_code_hash()


def _identity(simulate: str | None) -> str:
    return backend_of(EvaluationSetup("fp8_gemm", "cuda", "store", simulate=simulate)).identity


def test_the_backend_identity_names_the_simulators_recording_or_the_host():
    assert _identity("/x/r.json") == "simulator:r.json" != _identity("")
    host = _identity(None)
    assert host == "none" or "," in host  # "model, driver" per GPU, as nvidia-smi reports them


def test_the_verdict_key_leaves_out_the_gpus_and_the_store_but_not_the_backend():
    """A rerun on other GPUs of the host (or into another store) reuses a verdict; the simulator's does not."""
    setup = EvaluationSetup("fp8_gemm", "cuda", "store", simulate="/x/r.json")
    fields = cache_keys.SetupFields(names=("problem", "target", "arch", "simulate"))

    def key(**changes) -> str:
        return fields.compute_key(None, {"setup": replace(setup, **changes)}, {})

    assert key(gpus=("1", "2")) == key(store_root="elsewhere") == key()
    assert key(simulate="/x/other.json") != key() != key(problem="rmsnorm")


@pytest.fixture(scope="module")
def prefect(shared_prefect_api):
    with on_shared_api(shared_prefect_api):
        yield


@pytest.mark.slow
@pytest.mark.usefixtures("prefect")
class TestReruns:
    @staticmethod
    def _run(tmp_path, run: str, gpus: list[str]) -> dict:
        (summary,) = evolve(
            problem="fp8_gemm",
            target="cuda",
            generations=1,
            run=run,
            children=3,
            store_root=str(tmp_path / "store"),
            simulate=str(RECORDING),
            gpus=gpus,
        )
        return summary

    @pytest.fixture(autouse=True)
    def _pinned_code(self, monkeypatch):
        """The code hashes as they are now: a file edited elsewhere while the test runs does not change a key."""
        harness, compiling = cache_keys.harness_code_hash(), cache_keys.compile_code_hash()
        proposer, render = cache_keys.proposer_code_hash(), cache_keys.render_code_hash()
        templates = cache_keys.template_hash("fp8_gemm")
        monkeypatch.setattr(cache_keys, "harness_code_hash", lambda: harness)
        monkeypatch.setattr(cache_keys, "compile_code_hash", lambda: compiling)
        monkeypatch.setattr(cache_keys, "proposer_code_hash", lambda: proposer)
        monkeypatch.setattr(cache_keys, "render_code_hash", lambda: render)
        monkeypatch.setattr(cache_keys, "template_hash", lambda problem: templates)

    @staticmethod
    def _count_phases(monkeypatch) -> list[tuple[str, ...]]:
        phases: list[tuple[str, ...]] = []
        run = Simulator.run

        def counted(self, problem, source, compiled, ran, *args, **kwargs):
            phases.append(tuple(ran))
            return run(self, problem, source, compiled, ran, *args, **kwargs)

        monkeypatch.setattr(Simulator, "run", counted)
        return phases

    def test_a_rerun_on_other_gpus_reuses_every_verdict(self, tmp_path, monkeypatch):
        first = self._run(tmp_path, "gpus", ["0"])
        assert first["benchmarked"] + first["benchmark_cache_hits"] > 0
        phases = self._count_phases(monkeypatch)
        again = self._run(tmp_path, "gpus", ["1", "2"])
        assert phases == [] and again["benchmarked"] == 0 and again["compiled"] == 0
        assert again["benchmark_cache_hits"] == first["benchmarked"] + first["benchmark_cache_hits"]

    def test_a_changed_harness_re_verifies_and_re_times_but_does_not_recompile(self, tmp_path, monkeypatch):
        first = self._run(tmp_path, "harness", ["0"])
        rows = LineageStore(tmp_path / "store").read("harness")
        timed = first["benchmarked"] + first["benchmark_cache_hits"]
        copy = tmp_path / "ksci"
        shutil.copytree(cache_keys.KSCI, copy)
        check = copy / "evaluate" / "harness" / "check.py"
        # A change never seen before (persisted results outlive a test session): a key of its own.
        check.write_text(check.read_text() + f"\n# a stricter check {uuid.uuid4()}\n")
        monkeypatch.setattr(
            cache_keys, "harness_code_hash", lambda: cache_keys.hash_files(copy, cache_keys.HARNESS_CODE)
        )
        phases = self._count_phases(monkeypatch)
        again = self._run(tmp_path, "harness", ["0"])
        assert again["compiled"] == 0 and again["compile_cache_hits"] == again["candidates"]
        assert again["benchmarked"] == timed and again["benchmark_cache_hits"] == 0
        assert phases.count(("verify", "benchmark")) == timed and len(phases) == timed  # one harness run each
        assert len(LineageStore(tmp_path / "store").read("harness")) == len(rows)  # no row twice

    def test_a_changed_reference_re_verifies(self, tmp_path, monkeypatch):
        self._run(tmp_path, "reference", ["0"])
        digest = cache_keys.problem_hash("fp8_gemm")
        monkeypatch.setattr(cache_keys, "problem_hash", lambda problem: f"{digest}-{uuid.uuid4()}")
        phases = self._count_phases(monkeypatch)
        again = self._run(tmp_path, "reference", ["0"])
        assert again["benchmark_cache_hits"] == 0 and phases.count(("verify", "benchmark")) == again["benchmarked"] > 0

    def test_a_changed_template_re_renders_and_re_proposes(self, tmp_path, monkeypatch):
        """A rerun after a template changed renders its points again (it replayed the old source before)."""
        import tasks.proposing as proposing

        first = self._run(tmp_path, "template", ["0"])
        rendered: list[str] = []
        render = proposing.render_kernel

        def counted(template, params=None):
            rendered.append(template.name)
            return render(template, params)

        monkeypatch.setattr(proposing, "render_kernel", counted)
        self._run(tmp_path, "template", ["0"])
        assert rendered == []  # unchanged: every render replayed from the cache
        digest = f"changed-{uuid.uuid4()}"
        monkeypatch.setattr(cache_keys, "template_hash", lambda problem: digest)
        again = self._run(tmp_path, "template", ["0"])
        assert len(rendered) == first["candidates"] == again["candidates"] > 0
