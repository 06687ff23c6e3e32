"""`ksci import gpumode TASK_DIR`: a gpu-mode reference-kernels task (task.yml; reference.py with
generate_input(**shape) -> data, ref_kernel(data) -> output, check_implementation) as a ksci problem folder.

The mapping (docs/problem-format.md, "Imported problems"):
- entry point `extern "C" int NAME(the data's tensors..., [out,] the shape's ints..., void* stream)`: the tensors
  in the order generate_input returns them, named as ref_kernel unpacks them (`a, b, c = data`); a preallocated
  output that ref_kernel fills and returns (amd-fp8-mm's `c`) is the kernel's output, else a new `out` is;
- shapes: task.yml's tests and benchmarks, seeds included; every key but seed is an int argument;
- layouts: each tensor as generate_input makes it (row-major, or column-major for a transposed 2-D tensor);
- tolerance: check_implementation = make_match_reference(ref_kernel, rtol=..., atol=...) (gpu-mode's defaults
  1e-5 / 1e-8 where it names none); a hand-written check_implementation cannot be mapped;
- vendor: torch.compile of ref_kernel, eager where that fails.
What cannot be mapped (several outputs, an input changed in place, randomness, unsupported dtypes or layouts,
non-int shape values) is an ImportFailure naming the construct; nothing is written then.
"""

from __future__ import annotations

import ast
import hashlib
import math
from dataclasses import replace
from pathlib import Path

import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from ksci.importers import common
from ksci.importers.common import ImportedProblem, ImportFailure, TensorSpec, Unmappable, tensor_spec
from ksci.importers.runtime import DEVICE_NOTE, MatchReference, execute, module_of, seeded, utils_module
from ksci.problem.spec import kernels_dir

TEMPLATE_FILES = ("submission.py", "template.py")


def import_gpumode(
    task_dir: Path, name: str | None = None, dest: Path | None = None, replace: bool = False
) -> ImportedProblem | ImportFailure:
    try:
        return _import(Path(task_dir), name, Path(dest) if dest else kernels_dir(), replace)
    except Unmappable as exc:
        return exc.failure


def _import(task_dir: Path, requested: str | None, dest: Path, replace: bool) -> ImportedProblem:
    task, text = _read(task_dir)
    name = common.problem_name(requested, task_dir.resolve().name)
    tests, benchmarks = _shapes(task, "tests"), _shapes(task, "benchmarks")
    ns = _execute(task_dir, text)
    tolerance = _tolerance(ns)
    names = _data_names(text)
    probes = [_probe(ns, shape, names) for shape in [*benchmarks, *tests]]
    first = probes[0]
    output = first["output"]
    specs = _agreed_specs(probes)
    _unambiguous([p["row"] for p in probes])
    smallest = min(tests, key=lambda s: math.prod(v for k, v in s.items() if k != "seed"))
    _check_semantics(ns, smallest, first["data"], output)
    ints = [k for k in benchmarks[0] if k != "seed"]
    clash = {t.name for t in specs} & set(ints)
    if clash:
        raise Unmappable("name clash", f"{', '.join(sorted(clash))} is both a tensor and a shape key")
    layouts = {t.name: f"{' x '.join(map(str, t.shape))} at the first benchmark, {t.layout}" for t in specs}
    parts = common.SpecParts(
        name=name,
        description=_description(task_dir, task, specs, layouts, output, ints),
        tensors=specs,
        output=output,
        ints=ints,
        layouts=layouts,
        tolerance=tolerance,
        tests=tests,
        benchmarks=benchmarks,
        ranking={"geom": "geomean"}.get(str(task.get("ranking_by", "geom")), str(task.get("ranking_by"))),
        imported=_provenance(task, text, probes),
    )
    spec = common.problem_spec(parts)
    rows = [{"role": "benchmark", **p["row"]} for p in probes[: len(benchmarks)]]
    rows += [{"role": "test", **p["row"]} for p in probes[len(benchmarks) :]]
    files = {
        "problem.yaml": common.dump_yaml(spec),
        "reference.py": common.render("reference.py.j2", problem=spec, fmt="gpumode", cls="GpuModeReference"),
        "README.md": common.render("README.md.j2", problem=spec, fmt="gpu-mode", rows=rows, source=task_dir.name),
        "imported/reference.py": text,
        "imported/task.yml": (task_dir / "task.yml").read_text(),
    }
    for extra in ("task.py", *TEMPLATE_FILES):
        if (task_dir / extra).is_file():
            files[f"imported/{extra}"] = (task_dir / extra).read_text()
    root = common.write_problem(dest, name, files, replace)
    return ImportedProblem(name, root, len(tests), len(benchmarks), (f"output: {output}",))


def _read(task_dir: Path) -> tuple[dict, str]:
    for needed in ("task.yml", "reference.py"):
        if not (task_dir / needed).is_file():
            raise Unmappable("not a gpu-mode task", f"{task_dir} has no {needed}")
    for name in ("task.yml", "reference.py", "task.py", *TEMPLATE_FILES):  # what is copied into the problem folder
        if (task_dir / name).exists() and not (task_dir / name).resolve().is_relative_to(task_dir.resolve()):
            raise Unmappable("link outside the task", f"{task_dir / name} is a link that leads outside {task_dir}")
    try:
        task = yaml.safe_load((task_dir / "task.yml").read_text())
    except yaml.YAMLError as exc:
        raise Unmappable("task.yml", f"not YAML: {exc}") from None
    text = (task_dir / "reference.py").read_text()
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise Unmappable("not Python", f"reference.py: {exc}") from None
    return task, text


def _shapes(task: dict, key: str) -> list[dict]:
    shapes = task.get(key)
    if not shapes or not all(isinstance(s, dict) for s in shapes):
        raise Unmappable(f"task.yml {key}", f"expected a non-empty list of dicts under {key}:")
    for shape in shapes:
        odd = [f"{k}={v!r}" for k, v in shape.items() if type(v) is not int]
        if odd:
            raise Unmappable("non-int shape value", f"{key}: {', '.join(odd)}: the entry point takes ints only")
        if "seed" not in shape:
            raise Unmappable("shape without seed", f"{key}: {shape} has no seed")
    if len({tuple(s) for s in shapes}) != 1:
        raise Unmappable(f"task.yml {key}", "every shape must have the same keys, in the same order")
    return [dict(s) for s in shapes]


def _execute(task_dir: Path, text: str) -> dict:
    modules = {"utils": utils_module()}
    try:
        if (task_dir / "task.py").is_file():
            task_py = task_dir / "task.py"
            modules["task"] = module_of("task", execute(task_py.read_text(), str(task_py)))
        ns = execute(text, str(task_dir / "reference.py"), modules)
    except Exception as exc:
        raise Unmappable("reference.py does not run", f"{type(exc).__name__}: {exc}") from None
    missing = [n for n in ("generate_input", "ref_kernel") if not callable(ns.get(n))]
    if missing:
        raise Unmappable("not a gpu-mode reference", f"reference.py defines no {', '.join(missing)}")
    return ns


def _tolerance(ns: dict) -> dict:
    check = ns.get("check_implementation")
    if not isinstance(check, MatchReference):
        raise Unmappable(
            "custom check_implementation",
            "only check_implementation = make_match_reference(ref_kernel, rtol=..., atol=...) maps to a tolerance",
        )
    return {"rtol": float(check.rtol), "atol": float(check.atol)}


def _data_names(text: str) -> list[str] | None:
    """The names ref_kernel unpacks its data into (`a, b, c = data`), or None."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            param = node.args.args[0].arg
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.value, ast.Name)
                    and statement.value.id == param
                    and isinstance(statement.targets[0], ast.Tuple)
                ):
                    return [t.id if isinstance(t, ast.Name) else "_" for t in statement.targets[0].elts]
            return [param]
    return None


def _draw(ns: dict, shape: dict, seed: int, device: str) -> tuple[list, bool]:
    ns["_KSCI_DEVICE"] = device
    with seeded(seed, device):
        torch.manual_seed(seed)
        data = ns["generate_input"](**{k: v for k, v in shape.items() if k != "seed"}, seed=seed)
    return (list(data), True) if isinstance(data, tuple | list) else ([data], False)


def _probe(ns: dict, shape: dict, names: list[str] | None) -> dict:
    """The data's specs, the output and the shape's table row, on meta tensors."""
    try:
        data, packed = _draw(ns, shape, shape["seed"], "meta")
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = ns["ref_kernel"](tuple(data) if packed else data[0])
    except Exception as exc:
        raise Unmappable("the reference does not run", f"at {shape}: {type(exc).__name__}: {exc}") from None
    if isinstance(out, tuple | list | dict):
        raise Unmappable("several outputs", f"ref_kernel returns {len(out)} values; one output tensor is supported")
    if not isinstance(out, torch.Tensor):
        raise Unmappable("non-tensor output", f"ref_kernel returns a {type(out).__name__}")
    for i, value in enumerate(data):
        if not isinstance(value, torch.Tensor):
            raise Unmappable("non-tensor input", f"generate_input's item {i} is a {type(value).__name__}")
    names = names if names and len(names) == len(data) else [f"in{i}" for i in range(len(data))]
    names = [common.c_identifier(n) for n in names]
    specs = [tensor_spec(n, t, "input") for n, t in zip(names, data, strict=True)]
    preallocated = [n for n, t in zip(names, data, strict=True) if t is out]
    output = preallocated[0] if preallocated else ("out" if "out" not in names else "output")
    if not preallocated:
        specs.append(tensor_spec(output, out, "output"))
    spec_out = next(t for t in specs if t.name == output)
    if spec_out.layout != "row-major":
        raise Unmappable(
            "column-major output", f"the output {output!r} is {spec_out.layout}; outputs must be contiguous"
        )
    moved = sum(t.numel() * t.element_size() for t in data) + (0 if preallocated else out.numel() * out.element_size())
    row = {
        "shape": {k: v for k, v in shape.items() if k != "seed"},
        "inputs": {n: list(t.shape) for n, t in zip(names, data, strict=True) if n != output},
        "output": list(out.shape),
        "flops": int(counter.get_total_flops()),
        "bytes": int(moved),
    }
    dtype = common.dtype_name(out)
    return {"specs": specs, "output": output, "packed": packed, "row": row, "out_dtype": dtype, "data": names}


def _agreed_specs(probes: list[dict]) -> list[TensorSpec]:
    """The tensors' specs, the same at every shape; a layout from a shape where it tells (not N x 1 or 1 x 1)."""
    specs = list(probes[0]["specs"])
    for probe in probes[1:]:
        theirs = probe["specs"]
        same = [(t.name, t.dtype) for t in theirs] == [(t.name, t.dtype) for t in specs]
        for i, (mine, other) in enumerate(zip(specs, theirs, strict=False)):
            if mine.any_layout and not other.any_layout:
                specs[i] = replace(mine, layout=other.layout)
            elif not other.any_layout and mine.layout != other.layout:
                same = False
        if not same:
            where = probe["row"]["shape"]
            raise Unmappable("tensors vary with the shape", f"at {where} the data's names, dtypes or layouts differ")
    return specs


def _unambiguous(rows: list[dict]) -> None:
    """reference(inputs) finds its shape by the inputs' dims: equal dims must mean an equal output."""
    for i, row in enumerate(rows):
        for other in rows[:i]:
            if row["inputs"] == other["inputs"] and row["output"] != other["output"]:
                raise Unmappable("ambiguous shapes", f"{row['shape']} and {other['shape']} have the same inputs")


def _check_semantics(ns: dict, shape: dict, names: list[str], output: str) -> None:
    """On the CPU: generate_input deterministic for a seed; ref_kernel leaves its inputs alone, same output twice."""
    data, packed = _draw(ns, shape, shape["seed"], "cpu")
    again, _ = _draw(ns, shape, shape["seed"], "cpu")
    drawn = zip(names, data, again, strict=True)
    if not all(_same(a, b) for n, a, b in drawn if n != output):  # an output buffer may be left uninitialised
        raise Unmappable("randomness in generate_input", "two draws with the same seed differ")
    before = [t.clone() for t in data]
    results = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
            results.append(ns["ref_kernel"](tuple(data) if packed else data[0]).clone())
        changed = [n for n, t, b in zip(names, data, before, strict=True) if n != output and not _same(t, b)]
        if changed:
            raise Unmappable("in-place semantics", f"ref_kernel modifies its input {', '.join(changed)} in place")
    if not _same(*results):
        raise Unmappable("randomness inside ref_kernel", "two calls on the same data differ: no fixed reference")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.to(torch.float64).nan_to_num(7.0), b.to(torch.float64).nan_to_num(7.0))


def _description(task_dir: Path, task: dict, specs: list[TensorSpec], layouts: dict, output: str, ints: list) -> str:
    """The task's own description, then how the entry point receives its data."""
    original = str(task.get("description") or "").strip()
    mapping = "\n".join(f"  {t.name}: {t.dtype}, {layouts[t.name]}" for t in specs)
    return (
        f"gpu-mode task {task_dir.resolve().name}: ref_kernel as one kernel (output {output}).\n"
        f"{original}\n\nAs the entry point gets them (imported/reference.py is the specification):\n{mapping}\n"
        f"Shape keys passed as ints after the tensors: {', '.join(ints)}.\n"
    )


def _provenance(task: dict, text: str, probes: list[dict]) -> dict:
    """problem.yaml's `imported` record: where the problem came from and how reference.py calls ref_kernel."""
    return {
        "format": "gpumode",
        "source": "reference.py",
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "rewritten": DEVICE_NOTE,
        "vendor": "torch.compile of ref_kernel; eager PyTorch where it fails",
        "lang": task.get("lang"),
        "timeouts": {k: task[k] for k in ("test_timeout", "benchmark_timeout", "ranked_timeout") if k in task},
        "data": probes[0]["data"],
        "data_is_tuple": probes[0]["packed"],
        "output_dtype": probes[0]["out_dtype"],
        "output_layout": "row-major",
        "shapes": [p["row"] for p in probes],
    }
