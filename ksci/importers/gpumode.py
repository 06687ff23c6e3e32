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

This module puts the problem folder together; gpumode_task.py reads and loads the task, gpumode_dryrun.py runs it
here (probes and checks within time limits), gpumode_specs.py types its tensors, gpumode_casts.py and
gpumode_entries.py map an input whose dtype varies and several entry points.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
import torch._dynamo  # noqa: F401 - imported before any time limit: an alarm inside a lazy import leaves it half-made

from ksci.importers import common
from ksci.importers import gpumode_casts as casts_of
from ksci.importers.common import ImportedProblem, ImportFailure, TensorSpec, Unmappable
from ksci.importers.gpumode_dryrun import blackwell_only, deferred_row, probe_all, run_checks, uses_nvfp4
from ksci.importers.gpumode_entries import fixed_arguments
from ksci.importers.gpumode_probe import Budget, own_check
from ksci.importers.gpumode_runtime import UTILS_NAMES
from ksci.importers.gpumode_shapes import Shapes, read_shapes
from ksci.importers.gpumode_specs import (
    agreed_specs,
    in_buffer_dims,
    layouts_of,
    named_outputs,
    shape_row,
    tensor_specs,
    unambiguous,
)
from ksci.importers.gpumode_task import (
    TEMPLATE_FILES,
    beside,
    commit_of,
    data_names,
    defaults,
    execute_task,
    output_names,
    read_task,
    task_hash,
)
from ksci.importers.runtime import DEVICE_NOTE
from ksci.problem.spec import kernels_dir

__all__ = ["import_gpumode", "task_hash"]


def import_gpumode(
    task_dir: Path, name: str | None = None, dest: Path | None = None, replace: bool = False
) -> ImportedProblem | ImportFailure:
    try:
        return _import(Path(task_dir), name, Path(dest) if dest else kernels_dir(), replace)
    except Unmappable as exc:
        return exc.failure


def _import(task_dir: Path, requested: str | None, dest: Path, replace: bool) -> ImportedProblem:
    task, text = read_task(task_dir)
    name = common.problem_name(requested, task_dir.resolve().name)
    shape_keys = {k for key in ("tests", "benchmarks") for s in task.get(key) or [] if isinstance(s, dict) for k in s}
    if task.get("multi_gpu") or task.get("world_size") or "world_size" in shape_keys:
        raise Unmappable("several GPUs", "the task runs on several GPUs (torch.distributed); a problem runs on one")
    ns = execute_task(task_dir, text)
    if "_ksci_entries" in ns:  # several entry points as one (gpumode_entries.py)
        task = _with_fixed(task_dir, task, ns, shape_keys)
    try:
        shapes = read_shapes(task, defaults(ns.get("generate_inputs") or ns["generate_input"]))
    except Unmappable as exc:  # a task that needs Blackwell says so first, whatever else it meets
        if uses_nvfp4(text) and not _on_blackwell():
            raise blackwell_only(f" (then: {exc.failure})") from None
        raise
    names = ns.get("_ksci_data_names") or data_names(text)
    budget = Budget()
    probes, reference = probe_all(ns, shapes, names, budget, text)
    probed = [p for p in probes if p is not None]
    probed = probed if any(p is reference for p in probed) else [reference, *probed]
    budget = Budget()  # the checks' own: the other shapes' probes took time of the first one
    out_names = ns.get("_ksci_output_names") or output_names(text, probed[0])
    kinds, reference, probed = run_checks(ns, shapes, names, budget, out_names, probed, reference)
    outputs, specs, casts, rows = _typed(ns, shapes, names, budget, probes, probed, kinds)
    ints = [k for k in shapes.benchmarks[0] if k != "seed"]
    clash = {t.name for t in specs} & set(ints)
    if clash:
        raise Unmappable("name clash", f"{', '.join(sorted(clash))} is both a tensor and a shape key")
    layouts = layouts_of(specs, outputs, probed[0], first_benchmark=probes[0] is not None)
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


def _on_blackwell() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 10


def _with_fixed(task_dir: Path, task: dict, ns: dict, shape_keys: set[str]) -> dict:
    """task.yml with generate_inputs' arguments that its shapes lack added to every shape, as eval.py fixes them."""
    eval_py = beside(task_dir, "eval.py")
    fixed = fixed_arguments(ns["generate_inputs"], eval_py.read_text() if eval_py else None, shape_keys)
    return {**task, **{k: [{**fixed, **s} for s in task.get(k) or []] for k in ("tests", "benchmarks")}}


def _typed(
    ns: dict, shapes: Shapes, names, budget: Budget, probes: list, probed: list[dict], kinds: dict
) -> tuple[dict, list[TensorSpec], dict, list[dict]]:
    """The outputs named, the tensors' specs (an input whose dtype varies cast, checked), the shape table's rows."""
    outputs = named_outputs(kinds, [n for n, _ in probed[0]["leaves"]])
    in_buffer_dims(outputs, [*probes, *probed])
    per_probe = [tensor_specs(p, outputs) for p in probed]
    casts = casts_of.common_dtypes(per_probe, outputs)
    specs = agreed_specs(casts_of.agree(per_probe, casts), probed)
    casts_of.verify(ns, casts, probed, shapes.cases, names, budget)
    shape_list = [*shapes.benchmarks, *shapes.tests]
    rows = [shape_row(p, outputs) if p else deferred_row(s) for p, s in zip(probes, shape_list, strict=True)]
    unambiguous(rows)
    return outputs, specs, casts, rows


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
        found = beside(task_dir, shared)
        if found:
            files[f"imported/{shared}"] = found.read_text()
    return files


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
        "task_commit": commit_of(task_dir),
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
