import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ksci.problem.render import check_params, render_kernel
from ksci.problem.schema import MAX_SHAPES
from ksci.problem.spec import ProblemError, has_entry_point, list_problems, load_problem, shape_key


def test_shipped_problems_load():
    assert {"fp8_gemm", "rmsnorm"} <= set(list_problems())
    for name in list_problems():
        problem = load_problem(name)
        assert problem.tests and problem.benchmarks
        assert all("seed" in s for s in problem.tests + problem.benchmarks)
        assert "stream" in problem.entry_args and set(problem.outputs) <= set(problem.entry_args)
        assert set(problem.dtypes) == {"cuda", "rocm"}
        for dialect in ("cuda", "hip"):
            assert problem.templates_for(dialect), f"{name} ships no {dialect} seed template"


def test_fp8_gemm_matches_the_task_definition():
    p = load_problem("fp8_gemm")
    assert len(p.tests) == 11 and len(p.benchmarks) == 18
    assert (p.rtol, p.atol) == (2e-2, 1e-3)
    assert p.tests[0] == {"m": 64, "n": 64, "k": 128, "seed": 6635}
    assert {shape_key(s) for s in p.benchmarks} >= {"1024x1536x7168", "6144x4096x512"}
    assert p.dtypes["rocm"]["a"] == "float8_e4m3fnuz" and p.dtypes["cuda"]["a"] == "float8_e4m3fn"
    assert [t.name for t in p.templates_for("cuda")][:1] == ["naive"]


def test_unknown_problem_is_a_clear_error():
    with pytest.raises(ProblemError, match="unknown problem 'nope'.*fp8_gemm"):
        load_problem("nope")


def test_entry_point_detection():
    assert has_entry_point('extern "C" int fp8_gemm(const void* a) { return 0; }', "fp8_gemm")
    assert has_entry_point('extern "C" {\nint fp8_gemm(void* s);\n}', "fp8_gemm")
    assert not has_entry_point("int fp8_gemm(const void* a) { return 0; }", "fp8_gemm")
    assert not has_entry_point('extern "C" int fp8_gemm2(void* a);', "fp8_gemm")


def test_template_parameters_are_checked():
    template = load_problem("fp8_gemm").templates_for("cuda")[0]
    name = next(iter(template.params))
    with pytest.raises(ProblemError, match="is not one of"):
        check_params(template, {name: 12345})
    with pytest.raises(ProblemError, match="no parameter"):
        check_params(template, {"NOT_A_PARAM": 1})
    assert check_params(template, {}) == template.default


def test_render_states_its_provenance_and_fills_every_parameter():
    for name in list_problems():
        for template in load_problem(name).templates:
            source = render_kernel(template)
            assert source.startswith(f"// ksci: rendered from {template.dialect}/{template.name}")
            assert "{{" not in source and "{%" not in source
            assert has_entry_point(source, load_problem(name).entry_name)


# ---- problem.yaml checked against its schema (issue 26): one line naming file, key and problem ----

ROOT = Path(__file__).resolve().parent.parent
RMSNORM = ROOT / "kernels" / "rmsnorm"


def _problem_folder(tmp_path: Path, name: str = "toy", edit=None) -> Path:
    """A copy of rmsnorm (its templates included) named `name` under tmp_path, with `edit` applied to its spec."""
    root = tmp_path / name
    shutil.copytree(RMSNORM, root, ignore=shutil.ignore_patterns("solutions", "__pycache__"))
    spec = yaml.safe_load((root / "problem.yaml").read_text())
    spec["name"] = name
    if edit:
        edit(spec)
    (root / "problem.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def _ksci(*args: str, kernels: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KSCI_KERNELS_DIR": str(kernels)}
    command = [sys.executable, "-m", "ksci.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def _one_line_error(out: subprocess.CompletedProcess, rc: int = 2) -> str:
    assert out.returncode == rc, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def _set(path: str, value):
    """An edit that sets spec[a][b]... = value for path 'a.b'."""

    def edit(spec):
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("tolerance.rtol", "abc"), "tolerance.rtol: input should be a valid number"),
        (lambda s: s["tests"].append({"m": -5, "n": "abc"}), "tests[18].m: input should be greater than or equal to 0"),
        (
            lambda s: s["tests"].append({"rows": 4, "cols": "abc", "seed": 1}),
            "tests[18].cols: input should be a valid integer",
        ),
        (lambda s: s["benchmarks"].append({"rows": 4, "cols": 8}), "benchmarks[9] has no seed"),
        (_set("tolerence", 1), "tolerence: unknown key"),
        (lambda s: s.pop("entry_point"), "entry_point: missing"),
        (_set("trials", "two"), "trials: input should be a valid integer"),
        (_set("inputs", ["spec", ""]), "inputs[1]: string should have at least 1 character"),
        (_set("inputs", "spec"), "inputs: input should be a valid list"),
        (_set("roofline.compute", "int4"), "roofline.compute: input should be 'fp8', 'bf16' or 'fp32'"),
        (lambda s: s["templates"]["cuda"][0].update(file="../../../../etc/passwd"), "outside the problem folder"),
        (lambda s: s["templates"]["cuda"][0].update(file="/etc/shadow"), "outside the problem folder"),
        (lambda s: s["templates"]["cuda"][0].update(colour="red"), "templates.cuda[0].colour: unknown key"),
        (lambda s: s["entry_point"]["args"].append("colz"), "'colz' is neither a tensor"),
    ],
)
def test_a_malformed_spec_is_one_line_naming_file_key_and_problem(tmp_path, monkeypatch, edit, message):
    _problem_folder(tmp_path, edit=edit)
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    with pytest.raises(ProblemError) as caught:
        load_problem("toy")
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'toy' / 'problem.yaml'}: ") and message in text and "\n" not in text


def test_the_input_profiles_key_is_accepted(tmp_path, monkeypatch):
    _problem_folder(tmp_path, edit=_set("inputs", ["spec", "full_range", "outliers", "zeros"]))
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    assert load_problem("toy").tests


def test_the_cli_says_a_bad_spec_in_one_line_without_a_traceback(tmp_path):
    _problem_folder(tmp_path, edit=_set("tolerance.rtol", "abc"))
    err = _one_line_error(_ksci("render", "--problem", "toy", "--template", "naive", kernels=tmp_path))
    assert "problem.yaml: tolerance.rtol:" in err


def test_a_template_file_linked_out_of_the_folder_is_refused(tmp_path, monkeypatch):
    root = _problem_folder(tmp_path)
    (root / "templates" / "cuda" / "naive.cu.j2").unlink()
    (root / "templates" / "cuda" / "naive.cu.j2").symlink_to("/etc/passwd")
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    with pytest.raises(
        ProblemError, match="templates/cuda/naive.cu.j2 is a link that leads outside the problem folder"
    ):
        load_problem("toy")


def test_a_jinja_syntax_error_is_one_line(tmp_path):
    root = _problem_folder(tmp_path)
    (root / "templates" / "cuda" / "naive.cu.j2").write_text('extern "C" int rmsnorm() {\n{% if %}\n}\n')
    err = _one_line_error(_ksci("render", "--problem", "toy", "--template", "naive", kernels=tmp_path))
    assert "naive.cu.j2:2: Jinja syntax error" in err


def test_a_huge_shape_list_is_refused_fast_before_parsing(tmp_path, monkeypatch):
    """10^5 shapes took 58 s to parse on every command; above MAX_SPEC_BYTES the file is not parsed at all."""
    root = _problem_folder(tmp_path)
    shapes = "".join(f"  - {{rows: {i % 500 + 1}, cols: 8, seed: {i}}}\n" for i in range(100_000))
    text = (root / "problem.yaml").read_text().replace("tests:\n", "tests:\n" + shapes, 1)
    (root / "problem.yaml").write_text(text)
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    started = time.thread_time()  # CPU time: a busy machine stretches the wall clock, not this
    with pytest.raises(ProblemError, match=r"KiB; a problem.yaml may have at most 512 KiB"):
        load_problem("toy")
    assert time.thread_time() - started < 1.0


def test_a_shape_list_at_the_limit_loads_quickly_and_one_more_is_refused(tmp_path, monkeypatch):
    shapes = [{"rows": i % 500 + 1, "cols": 8, "seed": i} for i in range(MAX_SHAPES)]
    _problem_folder(tmp_path, "many", edit=_set("tests", shapes))
    _problem_folder(tmp_path, "toomany", edit=_set("tests", [*shapes, shapes[0]]))
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    started = time.thread_time()
    assert len(load_problem("many").tests) == MAX_SHAPES
    assert time.thread_time() - started < 5.0  # CPU seconds; about 0.1 s on an idle machine
    with pytest.raises(ProblemError, match=rf"tests: list should have at most {MAX_SHAPES} items"):
        load_problem("toomany")


# ---- ksci problems (issue 27): a broken problem listed as such, aligned columns, plurals, whole descriptions ----


def _imported(flops: int):
    """An edit that makes the spec look imported: no templates, a shape table with this flop count."""

    def edit(spec):
        spec["templates"] = {}
        spec["benchmarks"] = spec["benchmarks"][:1]
        dims = {k: v for k, v in spec["benchmarks"][0].items() if k != "seed"}
        spec["imported"] = {"format": "kernelbench", "shapes": [{"shape": dims, "flops": flops, "bytes": 1}]}

    return edit


def test_problems_lists_the_good_ones_and_the_broken_one_with_its_reason(tmp_path):
    _problem_folder(tmp_path, "a_problem_with_a_long_name")
    _problem_folder(tmp_path, "counted", edit=_imported(805306368))
    _problem_folder(tmp_path, "uncounted", edit=_imported(0))
    _problem_folder(tmp_path, "bad", edit=_set("tolerance.rtol", "abc"))
    out = _ksci("problems", kernels=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = dict(line.split(maxsplit=1) for line in out.stdout.splitlines())
    assert list(lines) == ["a_problem_with_a_long_name", "bad", "counted", "uncounted"]
    assert lines["bad"].startswith("broken: ") and "tolerance.rtol" in lines["bad"]
    rows = out.stdout.splitlines()
    assert len({line.index(" tests") for line in rows if " tests" in line}) == 1  # aligned despite the long name
    assert "9 benchmarks" in lines["a_problem_with_a_long_name"] and "1 benchmark " in lines["counted"]
    assert "up to 805 MFLOP" in lines["counted"] and "flops unknown" in lines["uncounted"]
    assert "in float32, and store it as bfloat16." in lines["a_problem_with_a_long_name"]  # not cut at the comma
    entries = {e["name"]: e for e in json.loads(_ksci("problems", "--json", kernels=tmp_path).stdout)}
    assert entries["counted"]["flops"] == [805306368.0] and entries["uncounted"]["flops"] == [None]
    assert "tolerance.rtol" in entries["bad"]["broken"]


def test_problems_exits_0_when_every_problem_loads(tmp_path):
    _problem_folder(tmp_path, "fine")
    out = _ksci("problems", kernels=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("fine  18 tests  9 benchmarks  up to 537 MFLOP  Compute")
