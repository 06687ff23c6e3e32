"""`ksci import gpumode TASK_DIR`: a gpu-mode reference-kernels task (task.yml; reference.py with
generate_input(**shape) -> data, ref_kernel(data) -> output(s), check_implementation; utils.py and eval.py beside
the task or one folder up, as gpu-mode's runner places them) as a ksci problem folder.

The mapping (docs/problem-format.md, "Imported problems"):
- entry point `extern "C" int NAME(the data's tensors..., outputs..., the shape's ints..., void* stream)`: every
  tensor of the data (nested tuples, dicts, dataclasses and modules included, gpumode_data.py) in the order
  generate_input returns them, named after ref_kernel's unpacking (`a, b, c = data`) and their path; each output
  of ref_kernel (a tuple gives several); a preallocated buffer that ref_kernel fills and returns is that output;
  an input it updates and returns (a KV cache) is an input and a separate output;
- shapes: task.yml's tests and benchmarks (gpumode_shapes.py: case parameters as int-encoded constants, seeds
  supplied where a shape has none);
- layouts: each tensor as generate_input makes it; outputs are dense buffers in the reference's dims;
- tolerance: what check_implementation compares with (gpumode_probe.tolerance);
- vendor: torch.compile of ref_kernel, eager where that fails.
What cannot be mapped is an ImportFailure naming the construct and the limit; nothing is written then.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import replace
from pathlib import Path

import torch._dynamo  # noqa: F401 - imported before any time limit: an alarm inside a lazy import leaves it half-made
import yaml

from ksci.importers import common
from ksci.importers import gpumode_casts as casts_of
from ksci.importers.common import ImportedProblem, ImportFailure, TensorSpec, Unmappable, tensor_spec
from ksci.importers.gpumode_entries import fixed_arguments
from ksci.importers.gpumode_probe import Budget, Semantics, own_check, probe, smallest
from ksci.importers.gpumode_runtime import UTILS_NAMES, load_task
from ksci.importers.gpumode_shapes import Shapes, read_shapes
from ksci.importers.limits import time_limit
from ksci.importers.runtime import DEVICE_NOTE
from ksci.problem.spec import kernels_dir

TEMPLATE_FILES = ("submission.py", "template.py")
SHAPE_LIMIT_S = 15.0  # one shape's probe, other than the smallest test shape's
OTHER_SHAPES_S = 60.0  # all real runs of the other shapes together
FIRST_LIMIT_S = 40.0  # the smallest test shape's probe; past it, a reduced shape stands in
REDUCE = 8  # a reduced shape: each size of 16 or more divided by this


def reduced(shape: dict, cases: dict) -> dict:
    """`shape` with each size of 16 or more divided by REDUCE (case indices and the seed kept)."""
    return {k: (v // REDUCE if k != "seed" and k not in cases and v >= 16 else v) for k, v in shape.items()}


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
    shape_keys = {k for key in ("tests", "benchmarks") for s in task.get(key) or [] if isinstance(s, dict) for k in s}
    if task.get("multi_gpu") or task.get("world_size") or "world_size" in shape_keys:
        raise Unmappable("several GPUs", "the task runs on several GPUs (torch.distributed); a problem runs on one")
    ns = _execute(task_dir, text)
    if "_ksci_entries" in ns:  # several entry points as one (gpumode_entries.py): eval.py fixes what shapes lack
        eval_py = _beside(task_dir, "eval.py")
        fixed = fixed_arguments(ns["generate_inputs"], eval_py.read_text() if eval_py else None, shape_keys)
        task = {**task, **{k: [{**fixed, **s} for s in task.get(k) or []] for k in ("tests", "benchmarks")}}
    shapes = read_shapes(task, _defaults(ns.get("generate_inputs") or ns["generate_input"]))
    names = ns.get("_ksci_data_names") or _data_names(text)
    budget = Budget()
    probes, reference = _probe_all(ns, shapes, names, budget, text)
    probed = [p for p in probes if p is not None]
    probed = probed if any(p is reference for p in probed) else [reference, *probed]
    budget = Budget()  # the checks' own: the other shapes' probes took time of the first one
    out_names = ns.get("_ksci_output_names") or _output_names(text, probed[0])
    kinds, reference, probed = _checks(ns, shapes, names, budget, out_names, probed, reference)
    outputs = _named_outputs(kinds, [n for n, _ in probed[0]["leaves"]])
    _in_buffer_dims(outputs, [*probes, *probed])
    per_probe = [_specs(p, outputs) for p in probed]
    casts = casts_of.common_dtypes(per_probe, outputs)
    specs = _agreed_specs(casts_of.agree(per_probe, casts), probed)
    casts_of.verify(ns, casts, probed, shapes.cases, names, budget)
    shape_list = [*shapes.benchmarks, *shapes.tests]
    rows = [_row(p, outputs) if p else _deferred_row(s) for p, s in zip(probes, shape_list, strict=True)]
    _unambiguous(rows)
    ints = [k for k in shapes.benchmarks[0] if k != "seed"]
    clash = {t.name for t in specs} & set(ints)
    if clash:
        raise Unmappable("name clash", f"{', '.join(sorted(clash))} is both a tensor and a shape key")
    layouts = _layouts(specs, outputs, probed[0], first_benchmark=probes[0] is not None)
    own = any(p["tolerance"] is None for p in probed)
    if own:  # the task's check_implementation is the verdict; no elementwise tolerance is compared
        own_check(ns, reference["shape"], shapes.cases, names, budget)
    rtol = max((p["tolerance"] or (0.0, 0.0))[0] for p in probed)
    atol = max((p["tolerance"] or (0.0, 0.0))[1] for p in probed)
    parts = common.SpecParts(
        name=name,
        description=_description(task_dir, task, specs, layouts, list(outputs), ints, shapes, ns.get("_ksci_entries")),
        tensors=specs,
        output=list(outputs),
        ints=ints,
        layouts=layouts,
        tolerance={"rtol": rtol, "atol": atol},
        tests=shapes.tests,
        benchmarks=shapes.benchmarks,
        ranking={"geom": "geomean"}.get(str(task.get("ranking_by", "geom")), str(task.get("ranking_by"))),
        imported={
            **_provenance(task_dir, task, text, probed, rows, outputs, shapes, names),
            "check": "task" if own else "tolerance",
            "casts": casts,
            "checks_at": {k: v for k, v in reference["shape"].items() if k != "seed"},
        },
    )
    spec = common.problem_spec(parts)
    files = _files(task_dir, spec, text, rows, len(shapes.benchmarks))
    root = common.write_problem(dest, name, files, replace)
    notes = (f"outputs: {', '.join(outputs)}", *(f"case {k}: {v}" for k, v in shapes.cases.items()))
    return ImportedProblem(name, root, len(shapes.tests), len(shapes.benchmarks), notes)


def _checks(
    ns: dict, shapes: Shapes, names: list[str] | None, budget: Budget, out_names, probed: list[dict], reference: dict
) -> tuple[dict, dict, list[dict]]:
    """What each of the reference's outputs is (Semantics.kinds), checked at the reference shape, or where that is
    slow here, at a reduced copy of it (probed too, and put first); the kinds, the shape's probe and the probes."""
    try:
        with budget.real(f"the checks at {reference['shape']}"), time_limit(FIRST_LIMIT_S, _Deferred):
            return Semantics(ns, reference["shape"], shapes.cases, names).kinds(out_names), reference, probed
    except _Deferred:  # slow at that size here: the checks at a reduced copy of it
        smaller = reduced(reference["shape"], shapes.cases)
        if smaller == reference["shape"]:
            raise budget.refusal(f"the checks at {smaller}") from None
        reference = probe(ns, smaller, shapes.cases, names, budget)
        with budget.real(f"the checks at {smaller}"):
            return Semantics(ns, smaller, shapes.cases, names).kinds(out_names), reference, [reference, *probed]


def _layouts(specs: list, outputs, first: dict, first_benchmark: bool) -> dict[str, str]:
    """Each tensor's shape and layout as the description gives them, at the first benchmark (or the first shape
    probed); an output the reference returns strided says so."""
    at = "the first benchmark" if first_benchmark else str({k: v for k, v in first["shape"].items() if k != "seed"})
    layouts = {t.name: f"{' x '.join(map(str, t.shape))} at {at}, {t.layout}" for t in specs}
    for output, tensor in zip(outputs, first["outputs"], strict=True):
        if output in layouts and not tensor.is_contiguous():
            layouts[output] += f" (the reference returns it with strides {tuple(tensor.stride())}; values compared)"
    return layouts


def _probe_all(
    ns: dict, shapes: Shapes, names: list[str] | None, budget: Budget, text: str
) -> tuple[list[dict | None], dict]:
    """Each benchmark and test shape probed (gpumode_probe.probe), the smallest test shape first and always; another
    shape whose probe takes over SHAPE_LIMIT_S on this machine, or whose real run finds OTHER_SHAPES_S spent, is
    deferred (None): its dims, flops and bytes are
    measured where the problem runs (GpuModeReference completes its row before the first draw). Where the smallest
    test shape itself takes over FIRST_LIMIT_S, a reduced copy of it (sizes divided by REDUCE) is probed instead
    and the semantic checks run there. Returns the probes and the one the checks use."""
    ordered = [*shapes.benchmarks, *shapes.tests]
    first = ordered.index(smallest(shapes.tests))
    probes: list[dict | None] = [None] * len(ordered)
    rest = Budget(OTHER_SHAPES_S)  # the other shapes' real runs: past it, each is deferred at once
    try:
        reference = _probe_or_defer(ns, ordered[first], shapes.cases, names, budget, FIRST_LIMIT_S)
        if reference is None:  # the smallest test is slow here: a reduced one stands in for the checks
            smaller = reduced(ordered[first], shapes.cases)
            try:
                if smaller == ordered[first]:
                    raise Unmappable("no reduced shape", f"{smaller} has no size of 16 or more")
                reference = probe(ns, smaller, shapes.cases, names, budget)
            except Unmappable:  # the task does not hold at a reduced size: its smallest test, within the budget
                reference = probes[first] = probe(ns, ordered[first], shapes.cases, names, budget)
        else:
            probes[first] = reference
        for i, shape in enumerate(ordered):
            if i != first or probes[first] is None:
                probes[i] = probes[i] or _probe_or_defer(ns, shape, shapes.cases, names, rest)
    except Unmappable as exc:
        if exc.failure.construct == "the reference does not run" and "_scaled_mm" in text and "float4" in text:
            raise Unmappable(
                "Blackwell-only operation",
                "the reference calls torch._scaled_mm on block-scaled FP4 (NVFP4), which runs on NVIDIA Blackwell "
                "(sm_100) GPUs only: import it on one",
            ) from None
        raise
    return probes, reference


class _Deferred(BaseException):  # noqa: N818 - not an Exception: the reference's own `except Exception` lets it pass
    """One shape's probe ran past its share of time."""


def _probe_or_defer(
    ns: dict, shape: dict, cases: dict, names: list[str] | None, budget: Budget, seconds: float = 0.0
) -> dict | None:
    try:
        with time_limit(seconds or SHAPE_LIMIT_S, _Deferred):
            return probe(ns, shape, cases, names, budget)
    except _Deferred:
        return None
    except Unmappable as exc:
        if exc.failure.construct == "reference too slow to probe":
            return None
        raise


def _deferred_row(shape: dict) -> dict:
    return {
        "shape": {k: v for k, v in shape.items() if k != "seed"},
        "seed": shape["seed"],
        "deferred": f"not probed: over {SHAPE_LIMIT_S:.0f} s (or {OTHER_SHAPES_S:.0f} s for all) here; measured where it runs",
        "flops": None,
        "bytes": None,
    }


def _defaults(function) -> dict:
    import inspect

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _files(task_dir: Path, spec: dict, text: str, rows: list[dict], benchmarks: int) -> dict[str, str]:
    table = [
        {
            "role": "benchmark" if i < benchmarks else "test",
            **row,
            **({"flops": "-", "bytes": "-"} if row.get("deferred") else {}),
        }
        for i, row in enumerate(rows)
    ]
    files = {
        "problem.yaml": common.dump_yaml(spec),
        "reference.py": common.render(
            "reference.py.j2", problem=spec, fmt="gpumode", module="gpumode_runtime", cls="GpuModeReference"
        ),
        "README.md": common.render("README.md.j2", problem=spec, fmt="gpu-mode", rows=table, source=task_dir.name),
        "imported/reference.py": text,
        "imported/task.yml": (task_dir / "task.yml").read_text(),
    }
    for extra in ("task.py", *TEMPLATE_FILES):
        if (task_dir / extra).is_file():
            files[f"imported/{extra}"] = (task_dir / extra).read_text()
    for shared in UTILS_NAMES:
        found = _beside(task_dir, shared)
        if found:
            files[f"imported/{shared}"] = found.read_text()
    return files


def _beside(task_dir: Path, filename: str) -> Path | None:
    """gpu-mode's shared file: in the task's folder, else one folder up (where the repository keeps it)."""
    for folder in (task_dir, task_dir.resolve().parent):
        if (folder / filename).is_file():
            return folder / filename
    return None


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


ROCM_ONLY = {"aiter": "AMD's aiter (ROCm only: pip install from github.com/ROCm/aiter on a ROCm machine)"}


def _execute(task_dir: Path, text: str) -> dict:
    task_py = task_dir / "task.py"
    try:
        ns = load_task(task_dir / "reference.py", task_py if task_py.is_file() else None, _beside(task_dir, "utils.py"))
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in ROCM_ONLY:
            raise Unmappable(
                "ROCm-only dependency", f"reference.py imports {exc.name}: needs {ROCM_ONLY[top]}"
            ) from None
        raise Unmappable("missing module", f"reference.py imports {exc.name}: install it where you import") from None
    except Unmappable:
        raise
    except Exception as exc:
        raise Unmappable("reference.py does not run", f"{type(exc).__name__}: {exc}"[:300]) from None
    if not callable(ns.get("generate_input")) and callable(ns.get("generate_inputs")):
        entries = sorted(n for n in ns if n.startswith("reference_") and callable(ns[n]))
        raise Unmappable(
            "several entry points",
            f"reference.py defines generate_inputs and {', '.join(entries) or 'no ref_kernel'}, not one ref_kernel: "
            "a problem has one entry point",
        )
    missing = [n for n in ("generate_input", "ref_kernel") if not callable(ns.get(n))]
    if missing:
        raise Unmappable("not a gpu-mode reference", f"reference.py defines no {', '.join(missing)}")
    return ns


def _data_names(text: str) -> list[str] | None:
    """The names ref_kernel unpacks its data into (`a, b, c = data`, anywhere in its body), or None."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            param = node.args.args[0].arg
            for statement in ast.walk(node):
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.value, ast.Name)
                    and statement.value.id == param
                    and isinstance(statement.targets[0], ast.Tuple)
                ):
                    return [t.id if isinstance(t, ast.Name) else "_" for t in statement.targets[0].elts]
            return [param]
    return None


def _output_names(text: str, first: dict) -> list[str]:
    """The outputs' names: ref_kernel's `return a, b` where it returns names, else out, out1, ..."""
    count = len(first["outputs"])
    default = ["out"] if count == 1 else [f"out{i}" for i in range(count)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel":
            returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
            if count > 1 and returns and isinstance(returns[-1], ast.Tuple):
                elts = returns[-1].elts
                if len(elts) == count and all(isinstance(e, ast.Name) for e in elts):
                    return [common.c_identifier(e.id) for e in elts]
    return default


def _named_outputs(kinds: dict[str, dict], leaves: list[str]) -> dict[str, dict]:
    """Each output under the name the entry point uses: a buffer's is its input's; a new one's not an input's."""
    named = {}
    for name, kind in kinds.items():
        if kind["from"] == "buffer":
            named[kind["data"]] = kind
            continue
        while name in leaves or name in named:
            name = f"{name}_out"
        named[name] = kind
    return named


def _in_buffer_dims(outputs: dict[str, dict], probes: list[dict | None]) -> None:
    """Each probe's 0-dim output that a size-1 buffer holds (kind `scalar`) reshaped to the buffer's dims."""
    for p in {id(p): p for p in probes if p is not None}.values():
        leaves = dict(p["leaves"])
        p["outputs"] = [
            o.reshape(leaves[kind["data"]].shape) if kind.get("scalar") else o
            for kind, o in zip(outputs.values(), p["outputs"], strict=True)
        ]


def _specs(probe: dict, outputs: dict[str, dict]) -> list[TensorSpec]:
    buffers = {kind["data"]: name for name, kind in outputs.items() if kind["from"] == "buffer"}
    specs = [tensor_spec(n, t, "output" if n in buffers else "input") for n, t in probe["leaves"]]
    for (name, kind), out in zip(outputs.items(), probe["outputs"], strict=True):
        if kind["from"] != "buffer":
            spec = tensor_spec(name, out, "output")  # refuses a layout with gaps or overlap
            specs.append(replace(spec, layout="row-major"))  # the kernel writes a dense buffer; values compared
    return specs


def _row(probe: dict, outputs: dict[str, dict]) -> dict:
    out_names = set(outputs)
    return {
        "shape": {k: v for k, v in probe["shape"].items() if k != "seed"},
        "seed": probe["shape"]["seed"],
        "inputs": {n: list(t.shape) for n, t in probe["leaves"] if n not in out_names},
        "outputs": {n: list(o.shape) for n, o in zip(outputs, probe["outputs"], strict=True)},
        "flops": probe["flops"],
        "bytes": int(probe["bytes"]),
    }


def _agreed_specs(per_probe: list[list[TensorSpec]], probes: list[dict]) -> list[TensorSpec]:
    """The tensors' specs, the same at every shape; a layout from a shape where it tells (not N x 1 or 1 x 1)."""
    specs = list(per_probe[0])
    for theirs, one in zip(per_probe[1:], probes[1:], strict=True):
        same = [(t.name, t.dtype) for t in theirs] == [(t.name, t.dtype) for t in specs]
        for i, (mine, other) in enumerate(zip(specs, theirs, strict=False)):
            if mine.any_layout and not other.any_layout:
                specs[i] = replace(mine, layout=other.layout)
            elif not other.any_layout and mine.layout != other.layout:
                same = False
        if not same:
            where = {k: v for k, v in one["shape"].items() if k != "seed"}
            mine = {t.name: (t.dtype, t.layout) for t in specs}
            theirs_by = {t.name: (t.dtype, t.layout) for t in theirs}
            diff = [
                f"{n}: {mine.get(n)} vs {theirs_by.get(n)}"
                for n in {*mine, *theirs_by}
                if mine.get(n) != theirs_by.get(n)
            ]
            raise Unmappable(
                "tensors vary with the shape",
                f"at {where}: {'; '.join(sorted(diff))[:200]}: one entry point needs one dtype and layout per tensor",
            )
    return specs


def _unambiguous(rows: list[dict]) -> None:
    """reference(inputs) finds its shape by the inputs' dims: equal dims must mean equal outputs."""
    rows = [r for r in rows if "inputs" in r]  # a deferred shape's dims are known where it runs
    for i, row in enumerate(rows):
        for other in rows[:i]:
            if row["inputs"] == other["inputs"] and row["outputs"] != other["outputs"]:
                raise Unmappable("ambiguous shapes", f"{row['shape']} and {other['shape']} have the same inputs")


def _description(
    task_dir: Path,
    task: dict,
    specs: list[TensorSpec],
    layouts: dict,
    outputs: list,
    ints: list,
    shapes: Shapes,
    entries: list | None = None,
) -> str:
    """The task's own description, then how the entry point receives its data."""
    original = str(task.get("description") or "").strip()
    mapping = "\n".join(f"  {t.name}: {t.dtype}, {layouts[t.name]}" for t in specs)
    cases = "".join(f"Case {k}: passed as its index in {v}.\n" for k, v in shapes.cases.items())
    if entries:
        original += f"\n\nOne kernel computes {', '.join(entries)} (the task times them together)."
    seeds = "Seeds: the task's shapes have none; the importer gave each one.\n" if shapes.seeded else ""
    return (
        f"gpu-mode task {task_dir.resolve().name}: ref_kernel as one kernel (outputs {', '.join(outputs)}).\n"
        f"{original}\n\nAs the entry point gets them (imported/reference.py is the specification):\n{mapping}\n"
        f"Shape keys passed as ints after the tensors: {', '.join(ints)}.\n{cases}{seeds}"
    )


def _provenance(
    task_dir: Path,
    task: dict,
    text: str,
    probes: list[dict],
    rows: list[dict],
    outputs: dict,
    shapes: Shapes,
    names: list[str] | None,
) -> dict:
    """problem.yaml's `imported` record: where the problem came from and how reference.py calls ref_kernel."""
    first = probes[0]
    leaves = dict(first["leaves"])
    return {
        "format": "gpumode",
        "source": "reference.py",
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "task_sha256": task_hash(task_dir),
        "task_commit": _commit(task_dir),
        "rewritten": DEVICE_NOTE,
        "vendor": "torch.compile of ref_kernel; eager PyTorch where it fails",
        "lang": task.get("lang"),
        "timeouts": {k: task[k] for k in ("test_timeout", "benchmark_timeout", "ranked_timeout") if k in task},
        "names": names,
        "data": [n for n, _ in first["leaves"]],
        "data_is_tuple": first["packed"],
        "structured": first["structured"],
        "outputs": {
            n: {**k, "dtype": common.dtype_name(leaves[k["data"]] if k["from"] == "buffer" else o)}
            for (n, k), o in zip(outputs.items(), first["outputs"], strict=True)
        },
        "strides": {n: list(o.stride()) for n, o in zip(outputs, first["outputs"], strict=True)},
        "cases": shapes.cases,
        "probed_on": sorted({p["device"] for p in probes}),
        "shapes": rows,
    }


def task_hash(task_dir: Path) -> str:
    """sha256 over the task's files and the shared utils.py/eval.py it runs with: changes when the task does."""
    digest = hashlib.sha256()
    files = sorted(p for p in task_dir.iterdir() if p.is_file())
    files += [p for p in (_beside(task_dir, n) for n in UTILS_NAMES) if p and p.parent != task_dir]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _commit(task_dir: Path) -> str | None:
    """The git commit of the checkout the task is in, where it is one (else None: task_sha256 identifies it)."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(task_dir), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None
