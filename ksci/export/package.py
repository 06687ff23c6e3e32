"""Write the exported package: pyproject.toml (setuptools), the Python package with the custom op, spec.json, the
kernel source and libraries, reference.py, tests/, bench.py and README.md (templates in ksci/export/templates/).

The package is written into a hidden folder beside DIR and renamed to DIR at the end, so that a failed export leaves
no half-written package."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import jinja2
import pandas as pd

from ksci.export.build import STAND_IN, Built, copy_libraries
from ksci.export.contract import contract_json, dimensions, held_out_shapes, tensor_specs
from ksci.export.source import ExportRefused
from ksci.lineage.store import row_kind, shape_times
from ksci.problem.files import reference_support
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, Problem

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class Origin:
    """Where the kernel came from: the run, the store and its lineage row."""

    run: str
    store: str
    row: pd.Series


def write_package(problem: Problem, origin: Origin, source: str, built: Built, output: Path) -> Path:
    """The package in `output` (a new folder); returns it."""
    row = origin.row
    target = str(row["target"])
    package = f"ksci_{problem.name}"
    spec = _spec(problem, origin, built, target)
    output.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    try:
        pkg = work / package
        pkg.mkdir()
        spec["libraries"] = copy_libraries(built, pkg / "lib")
        (pkg / "spec.json").write_text(json.dumps(spec, indent=1) + "\n")
        suffix = SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[target]]
        converted = built.compiled_source != source  # CUDA converted to HIP for a ROCm run
        source_name = "kernel.cu" if converted else f"kernel{suffix}"
        (pkg / source_name).write_text(source)
        if converted:
            (pkg / f"kernel.compiled{suffix}").write_text(built.compiled_source)
        copy_reference(problem, pkg)
        _render_all(work, package, _context(problem, origin, built, spec, source_name, output))
        os.rename(work, output)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return output


def copy_reference(problem: Problem, pkg: Path) -> None:
    """reference.py into the package, with the modules of ksci/problem/ it imports beside it (fp8_block_scaled.py for
    the FP8 problems) and its imports of them made relative, so that the package needs no ksci."""
    text = problem.file("reference.py").read_text()
    for path in reference_support(text):
        shutil.copyfile(path, pkg / path.name)
        name = re.escape(path.stem)
        text = re.sub(rf"^from ksci\.problem import {name}\b", f"from . import {path.stem}", text, flags=re.MULTILINE)
        text = re.sub(rf"^from ksci\.problem\.{name} import ", f"from .{path.stem} import ", text, flags=re.MULTILINE)
    (pkg / "reference.py").write_text(text)


def _spec(problem: Problem, origin: Origin, built: Built, target: str) -> dict:
    tensors = [asdict(t) for t in tensor_specs(problem, target)]
    dims = dimensions(problem)
    bare = {d for t in tensors if t["name"] not in problem.outputs for d in t["dims"]}
    if missing := [d for d in dims if d not in bare]:
        raise ExportRefused(f"problem {problem.name}: dimension {missing[0]} is no axis of an input tensor")
    return {
        "problem": problem.name,
        "namespace": f"ksci_{problem.name}",
        "entry": problem.entry_name,
        "args": list(problem.entry_args),
        "outputs": list(problem.outputs),
        "tensors": tensors,
        "target": target,
        "contract": contract_json(problem),
        "tolerance": asdict(problem.tolerance(target)),
        "profiles": list(problem.inputs),
        "tests": [dict(s) for s in problem.tests],
        "benchmarks": [dict(s) for s in problem.benchmarks],
        "held_out": held_out_shapes(problem),
        "backend": STAND_IN if built.toolchain == STAND_IN else "kernel",
        "run": origin.run,
        "candidate": str(origin.row["candidate_id"]),
        "toolchain": built.toolchain,
    }


def _context(problem: Problem, origin: Origin, built: Built, spec: dict, source_name: str, output: Path) -> dict:
    row = origin.row
    outputs = list(problem.outputs)
    inputs = [t for t in spec["tensors"] if t["name"] not in outputs]
    ratio = row.get("speedup_vs_vendor")
    return {
        "problem": problem.name,
        "description": problem.description.strip(),
        "package": f"ksci_{problem.name}",
        "distribution": f"ksci-{problem.name.replace('_', '-')}",
        "version": f"0.1.0+{row['candidate_id']}",
        "namespace": spec["namespace"],
        "entry": problem.entry_name,
        "inputs": inputs,
        "outputs": outputs,
        "returns": "torch.Tensor" if len(outputs) == 1 else f"tuple[{', '.join(['torch.Tensor'] * len(outputs))}]",
        "tensors": spec["tensors"],
        "contract": spec["contract"],
        "run": origin.run,
        "store": origin.store,
        "candidate": spec["candidate"],
        "row": _plain(row),
        "kind": row_kind(row),
        "toolchain": built.toolchain,
        "flags": built.flags,
        "archs": list(built.libraries),
        "stand_in": spec["backend"] == STAND_IN,
        "against_vendor": _against(ratio),
        "shape_lines": _shape_lines(row),
        "source_name": source_name,
        "output_hint": str(output),
        "torch_note": ">= 2.4 (torch.library.custom_op, register_fake)",
        "vendor_note": "the problem's vendor baseline, e.g. cuBLASLt through torch._scaled_mm",
        "fmt": lambda v: "-" if v is None or pd.isna(v) else f"{float(v):.2f}",
    }


def _plain(row: pd.Series) -> dict:
    """The row's scalar values, None for nulls."""
    plain = {}
    for key, value in row.items():
        if isinstance(value, str) or not hasattr(value, "__len__"):
            plain[key] = None if not isinstance(value, str) and pd.isna(value) else value
    return plain


def _against(ratio) -> str:
    if ratio is None or pd.isna(ratio) or ratio <= 0:
        return "not recorded"
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def _shape_lines(row: pd.Series) -> list[dict]:
    times = shape_times(row.get("shape_times_json"))
    text = row.get("shape_baselines_json")
    baselines = json.loads(text) if isinstance(text, str) and text else {}
    lines = []
    for key, us in times.items():
        vendor = (baselines.get(key) or {}).get("vendor_us")
        ratio = f"{vendor / us:.2f}" if vendor and us else "-"
        lines.append(
            {"shape": key, "kernel": f"{us:.1f}", "vendor": f"{vendor:.1f}" if vendor else "-", "ratio": ratio}
        )
    return lines


def _render_all(work: Path, package: str, context: dict) -> None:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    for template in sorted(p.relative_to(TEMPLATES) for p in TEMPLATES.rglob("*") if p.is_file()):
        name = str(template)
        if "__pycache__" in name:
            continue
        relative = Path(name.removesuffix(".j2").replace("package/", f"{package}/", 1))
        text = env.get_template(name).render(**context) if name.endswith(".j2") else (TEMPLATES / name).read_text()
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        (work / relative).write_text(text)
