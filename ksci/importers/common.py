"""What both importers share: their result types, the tensor facts they record, and writing the problem folder.

An import either writes a whole problem folder (problem.yaml, reference.py, README.md) or nothing: the folder is
written beside its destination and renamed into place only once the written problem loads.
"""

from __future__ import annotations

import keyword
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import torch
import yaml

from ksci import PROJECT_ROOT
from ksci.problem.spec import ProblemError, _problem_from_spec, list_problems

TEMPLATES = PROJECT_ROOT / "templates" / "importers"
# The dtypes a kernel can be handed, with the roofline's compute unit for each (ksci/problem/roofline.py).
SUPPORTED_DTYPES = {
    "float32": "fp32",
    "float64": "fp32",
    "float16": "bf16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2": "fp8",
    "float8_e5m2fnuz": "fp8",
    "int64": "fp32",
    "int32": "fp32",
    "int16": "fp32",
    "int8": "fp8",
    "uint8": "fp8",
}
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class ImportFailure:
    """Why a source cannot become a problem: the construct, named, and what to do. Nothing was written."""

    construct: str
    message: str

    def __str__(self) -> str:
        return f"{self.construct}: {self.message}"


class Unmappable(Exception):
    """Raised inside an importer, turned into an ImportFailure at its edge."""

    def __init__(self, construct: str, message: str) -> None:
        message = " ".join(message.split())  # one line, whatever an exception's text held
        message = message if len(message) <= 400 else message[:397] + "..."
        super().__init__(f"{construct}: {message}")
        self.failure = ImportFailure(construct, message)


@dataclass(frozen=True)
class ImportedProblem:
    name: str
    root: Path
    tests: int
    benchmarks: int
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the entry point: its name, dtype, shape at one problem shape and its layout."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: str  # "row-major" (contiguous) or "column-major" (a transposed contiguous 2-D tensor)

    @property
    def any_layout(self) -> bool:
        """At most one dim above 1: row- and column-major are the same bytes."""
        return sum(d > 1 for d in self.shape) <= 1


def dtype_name(tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def tensor_spec(name: str, tensor, what: str) -> TensorSpec:
    """The spec of `tensor`, or Unmappable for a dtype or a layout that a kernel cannot be handed."""
    dtype = dtype_name(tensor)
    if dtype not in SUPPORTED_DTYPES:
        raise Unmappable(
            f"unsupported dtype {dtype}",
            f"{what} {name!r} is {dtype}; supported: {', '.join(SUPPORTED_DTYPES)}",
        )
    dense = tuple(torch.empty(tensor.shape, device="meta").stride())
    column = tensor.dim() == 2 and tuple(tensor.stride()) == (1, tensor.shape[0])
    if tuple(tensor.stride()) == dense:
        layout = "row-major"
    elif column:  # before is_contiguous(), which a column-major N x 1 tensor also passes
        layout = "column-major"
    elif tensor.is_contiguous():
        layout = "row-major"
    elif tensor.dim() == 2 and tensor.t().is_contiguous():
        layout = "column-major"
    elif dense_permutation(tensor):
        order = sorted(range(tensor.dim()), key=lambda i: (-tensor.stride(i), i))
        layout = f"dims {tuple(order)} outermost first (a permuted row-major tensor)"
    else:
        raise Unmappable(
            "non-dense layout",
            f"{what} {name!r} has strides {tuple(tensor.stride())} for shape {tuple(tensor.shape)}: elements overlap "
            "or leave gaps; a kernel is handed dense tensors (row-major, column-major or a permutation of dims)",
        )
    return TensorSpec(name, dtype, tuple(tensor.shape), layout)


def dense_permutation(tensor) -> bool:
    """The tensor's elements fill its span without gaps or overlap: a row-major tensor with its dims permuted."""
    dims = sorted((s, n) for s, n in zip(tensor.stride(), tensor.shape, strict=True) if n > 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def c_identifier(text: str) -> str:
    """`text` as a C identifier: other characters become underscores; a keyword or a leading digit gets a prefix."""
    name = re.sub(r"\W", "_", text)
    if not name or name[0].isdigit() or keyword.iskeyword(name) or name in _C_KEYWORDS:
        name = f"t_{name}"
    return name


_C_KEYWORDS = {"int", "float", "double", "char", "void", "const", "auto", "register", "long", "short", "signed"}


def problem_name(requested: str | None, fallback: str) -> str:
    """The problem's name: --name, else the source's file or folder name, lower-cased with underscores."""
    name = requested or re.sub(r"[^a-z0-9_]+", "_", fallback.lower()).strip("_")
    if not name or not name[0].isalpha():
        name = f"p_{name}"
    if not _NAME.match(name):
        raise Unmappable("problem name", f"{name!r}: use lower-case letters, digits and underscores (--name)")
    return name


def signature(entry: str, tensors: list[TensorSpec], outputs: list[str], ints: list[str]) -> str:
    args = [f"{'void' if t.name in outputs else 'const void'}* {t.name}" for t in tensors]
    args += [f"int {name}" for name in ints] + ["void* stream"]
    return f'extern "C" int {entry}({", ".join(args)})'


@dataclass(frozen=True)
class SpecParts:
    """What an importer found, in problem.yaml's terms; `problem_spec` lays it out the same way for every format."""

    name: str
    description: str
    tensors: list[TensorSpec]  # the entry point's tensors in argument order, the output among them
    output: str | list[str]  # the output, or the outputs in ref_kernel's order
    ints: list[str]  # the shape keys, passed as ints after the tensors
    layouts: dict[str, str]  # per tensor, its dims and layout in words
    tolerance: dict
    tests: list[dict]
    benchmarks: list[dict]
    ranking: str
    imported: dict  # the format's own record: provenance, and what the generated reference.py needs


def problem_spec(parts: SpecParts) -> dict:
    """problem.yaml's content for an imported problem: one entry point, both targets, no templates."""
    dtypes = {t.name: t.dtype for t in parts.tensors}
    outputs = parts.output if isinstance(parts.output, list) else [parts.output]
    largest = max(parts.tensors, key=lambda t: math.prod(t.shape))  # its dtype sets the roofline's compute unit
    return {
        "name": parts.name,
        "description": parts.description,
        "entry_point": {
            "name": parts.name,
            "signature": signature(parts.name, parts.tensors, outputs, parts.ints),
            "args": [*(t.name for t in parts.tensors), *parts.ints, "stream"],
            "outputs": outputs,
            "returns": "0 on success, else the runtime's error code (cudaError_t / hipError_t) of the launch",
        },
        "dtypes": {"cuda": dtypes, "rocm": dtypes},
        "layouts": parts.layouts,
        "tolerance": parts.tolerance,
        "trials": 2,
        "tests": parts.tests,
        "benchmarks": parts.benchmarks,
        "ranking": parts.ranking,
        "roofline": {"compute": SUPPORTED_DTYPES[largest.dtype]},
        "templates": {},
        "imported": parts.imported,
    }


def render(template: str, **values) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(template).render(**values)


def dump_yaml(spec: dict) -> str:
    """problem.yaml's text: block style at the top, flow style for shapes and dtype maps (as the shipped ones)."""

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            return True  # the two targets' dtypes are written out twice, not as an anchor and an alias

    def represent_dict(dumper, data):
        flow = all(not isinstance(v, dict | list) and len(str(v)) < 40 for v in data.values())
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=flow)

    def represent_str(dumper, data):
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    def represent_list(dumper, data):
        flow = all(not isinstance(v, dict | list) for v in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    Dumper.add_representer(dict, represent_dict)
    Dumper.add_representer(list, represent_list)
    Dumper.add_representer(str, represent_str)
    return yaml.dump(spec, Dumper=Dumper, sort_keys=False, width=120, allow_unicode=True)


def write_problem(dest: Path, name: str, files: dict[str, str], replace: bool = False) -> Path:
    """Write the folder dest/name with `files`, all or nothing: it must load as a problem first.

    Refuses a name that a problem on the search path already has (unless `replace` and it lives at dest/name)."""
    root = dest / name
    if root.exists() and not replace:
        raise Unmappable("problem exists", f"{root} exists (choose another --name, or --force to replace it)")
    if not root.exists() and name in list_problems():
        raise Unmappable("problem exists", f"a problem named {name!r} is already known (choose another --name)")
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest))
    try:
        for relative, text in files.items():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_text(text)
        try:
            _problem_from_spec(yaml.safe_load(files["problem.yaml"]), staging)
        except (KeyError, TypeError, ValueError, ProblemError) as exc:  # a bug of the importer, not of the input
            raise RuntimeError(f"the written problem.yaml does not load: {exc!r}") from exc
        if root.exists():
            shutil.rmtree(root)
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root
