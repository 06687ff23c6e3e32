"""Load kernel problems from `kernels/<name>/` (see docs/problem-format.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import yaml

from ksci import PROJECT_ROOT
from ksci.problem.constraints import Constraint, ConstraintError, parse_constraint
from ksci.problem.files import leads_outside, outside_link, reference_support
from ksci.problem.schema import MAX_SHAPES, MAX_SPEC_BYTES, check_spec

TARGETS = ("cuda", "rocm")
DIALECT_OF_TARGET = {"cuda": "cuda", "rocm": "hip"}
SUFFIX_OF_DIALECT = {"cuda": ".cu", "hip": ".hip"}


class ProblemError(ValueError):
    """A problem that does not exist or whose spec is malformed."""


@dataclass(frozen=True)
class TemplateSpec:
    name: str
    dialect: str
    path: Path
    params: dict[str, list]
    default: dict[str, object]
    constraints: tuple[Constraint, ...] = ()  # declared in problem.yaml; the template's static_asserts agree
    root: Path | None = None  # the problem folder: what the template includes or imports must resolve inside it

    def violations(self, params: dict) -> list[str]:
        """The declared constraints that the (complete) point violates, as written in problem.yaml."""
        return [c.text for c in self.constraints if not c.holds(params)]

    def feasible(self, params: dict) -> bool:
        return all(c.holds(params) for c in self.constraints)


@dataclass(frozen=True)
class Problem:
    name: str
    root: Path
    description: str
    entry_name: str
    entry_signature: str
    entry_args: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: dict[str, dict[str, str]]
    tests: tuple[dict, ...]
    benchmarks: tuple[dict, ...]
    rtol: float
    atol: float
    trials: int
    roofline_compute: str
    templates: tuple[TemplateSpec, ...] = field(default=())
    published_speed_of_light: dict = field(default_factory=dict)
    # Per-target overrides of {rtol, atol, atol_rms}; atol_rms scales the absolute term by the expected output's RMS.
    tolerance_by_target: dict = field(default_factory=dict)
    # Input profiles every test shape is verified on (reference.generate_input's `profile`); only "spec" is timed.
    inputs: tuple[str, ...] = ("spec",)
    imported: dict = field(default_factory=dict)  # an imported problem's record (ksci/importers/): source, shapes
    # Each dimension's {min, max, multiple_of} (ksci/problem/contract.py); empty: derived from the listed shapes.
    shape_contract: dict = field(default_factory=dict)

    def tolerance(self, target: str, profile: str | None = None) -> Tolerance:
        """The element-wise tolerance on `target`: |out - ref| <= atol + atol_rms * rms(ref) + rtol * |ref| + acc_rtol
        * |terms|; on input profile `profile`, the target's `profiles:` entry for it over the target's own."""
        override = self.tolerance_by_target.get(target, {})
        override = {**override, **(override.get("profiles") or {}).get(profile or "", {})}
        return Tolerance(
            rtol=float(override.get("rtol", self.rtol)),
            atol=float(override.get("atol", self.atol)),
            atol_rms=float(override.get("atol_rms", 0.0)),
            acc_rtol=float(override.get("acc_rtol", 0.0)),
        )

    def templates_for(self, dialect: str) -> list[TemplateSpec]:
        return [t for t in self.templates if t.dialect == dialect]

    def template(self, dialect: str, name: str) -> TemplateSpec:
        for t in self.templates_for(dialect):
            if t.name == name:
                return t
        known = ", ".join(t.name for t in self.templates_for(dialect)) or "none"
        raise ProblemError(f"problem {self.name!r} has no {dialect} template {name!r} (known: {known})")

    def file(self, relative: str) -> Path:
        """root/relative, refused (ProblemError) when its real path leads outside the problem folder."""
        path = self.root / relative
        if leads_outside(self.root, path):
            raise ProblemError(f"problem {self.name!r}: {relative} is a link that leads outside the problem folder")
        return path

    def reference_module(self) -> ModuleType:
        """Import reference.py (needs torch)."""
        path = self.file("reference.py")
        spec = importlib.util.spec_from_file_location(f"ksci_problem_{self.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def reference_text(self) -> str:
        """reference.py, the modules of ksci/problem/ it imports (reference_support), and for an imported problem the
        Python sources it adapts (imported/): what the LLM reads."""
        text = self.file("reference.py").read_text()
        for path in reference_support(text):
            text += f"\n\n# ---- ksci/problem/{path.name} ----\n{path.read_text()}"
        for path in sorted((self.root / "imported").glob("*.py")):
            text += f"\n\n# ---- imported/{path.name} ----\n{self.file(f'imported/{path.name}').read_text()}"
        return text

    def benchmark_flops(self) -> list[float | None]:
        """Each benchmark shape's flop count, None where none is known. An imported problem's come from the table
        its importer wrote (torch's flop counter, which counts matmuls and convolutions only: a 0 there means the
        work was not counted, not that there was none); a shipped problem's from reference.flops (imports torch)."""
        rows = (self.imported or {}).get("shapes")
        if rows is not None:
            table = {json.dumps(r.get("shape"), sort_keys=True): r.get("flops") for r in rows if isinstance(r, dict)}
            counted = [table.get(json.dumps(_dims(s), sort_keys=True)) for s in self.benchmarks]
            return [float(f) if isinstance(f, int | float) and f > 0 else None for f in counted]
        try:
            flops = self.reference_module().flops
            return [float(flops(s)) for s in self.benchmarks]
        except Exception:  # a reference that does not import here (no torch) or has no flops(): unknown, not fatal
            return [None] * len(self.benchmarks)

    def solutions(self, kind: str) -> list[Path]:
        """Known-good (`correct`), known-bad (`wrong`) or cheating (`adversarial`) kernels shipped with the problem."""
        folder = self.file(f"solutions/{kind}")
        found = sorted(p for p in folder.glob("*") if p.suffix in (".cu", ".hip"))
        return [self.file(f"solutions/{kind}/{p.name}") for p in found]


def kernels_dir() -> Path:
    """The first folder of the search path: where `ksci import` writes by default."""
    return problem_dirs()[0]


# Folders that `ksci import --dest DIR` wrote problems to, one a line: searched after kernels/ (generated output).
REGISTRY = PROJECT_ROOT / "data" / "problem_dirs"


def problem_dirs() -> list[Path]:
    """Where problems are looked for, in order: KSCI_KERNELS_DIR (folders separated by os.pathsep) when set;
    else kernels/ and then the folders `ksci import --dest` registered in data/problem_dirs."""
    override = os.environ.get("KSCI_KERNELS_DIR")
    if override:
        return [Path(p) for p in override.split(os.pathsep) if p]
    registered = REGISTRY.read_text().splitlines() if REGISTRY.is_file() else []
    folders = [PROJECT_ROOT / "kernels", *(Path(line) for line in registered if line.strip())]
    return list(dict.fromkeys(folders))


def register_problem_dir(folder: Path) -> None:
    """Make the problems in `folder` known to every command (ksci import --dest); a no-op when already searched."""
    folder = folder.resolve()
    if folder in [d.resolve() for d in problem_dirs()]:
        return
    if os.environ.get("KSCI_KERNELS_DIR"):
        return  # the caller chose the search path; the registry would not be read
    REGISTRY.parent.mkdir(parents=True, exist_ok=True)
    with REGISTRY.open("a") as fh:
        fh.write(f"{folder}\n")


def problem_root(name: str) -> Path | None:
    """The folder of problem `name`: the first on the search path that holds it, else None."""
    for folder in problem_dirs():
        if (folder / name / "problem.yaml").is_file():
            return folder / name
    return None


def list_problems() -> list[str]:
    return sorted({p.parent.name for folder in problem_dirs() for p in folder.glob("*/problem.yaml")})


def load_problem(name: str) -> Problem:
    root = problem_root(name)
    if root is None:
        known = ", ".join(list_problems()) or "none"
        raise ProblemError(f"unknown problem {name!r} (known: {known})")
    reason = outside_link(root)  # before problem.yaml is read: it may be such a link itself
    if reason:
        raise ProblemError(f"problem {name!r}: {reason}")
    return _problem_from_spec(read_spec(root / "problem.yaml"), root)


def read_spec(path: Path) -> object:
    """problem.yaml's content, parsed with libyaml (PyYAML's pure-Python loader took 58 s on 10^5 shapes); a file
    over MAX_SPEC_BYTES is refused before it is parsed, and a YAML error is one line naming the file and line."""
    size = path.stat().st_size
    if size > MAX_SPEC_BYTES:
        raise ProblemError(
            f"{path}: {size // 1024} KiB; a problem.yaml may have at most {MAX_SPEC_BYTES // 1024} KiB "
            f"(and {MAX_SHAPES} test and {MAX_SHAPES} benchmark shapes)"
        )
    try:
        return yaml.load(path.read_text(), Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ProblemError(f"{path}:{where} not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except UnicodeDecodeError:
        raise ProblemError(f"{path}: not a UTF-8 text file") from None


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the same results; libyaml is several times faster


def _problem_from_spec(spec: dict, root: Path) -> Problem:
    """A Problem from problem.yaml's content, checked against the schema first (ksci/problem/schema.py)."""
    try:
        check_spec(spec, root / "problem.yaml")
    except ValueError as exc:
        raise ProblemError(str(exc)) from None
    entry = spec["entry_point"]
    templates = []
    for dialect, items in (spec.get("templates") or {}).items():
        for item in items or []:
            templates.append(_template_from_spec(item, dialect, root))
    return Problem(
        name=spec["name"],
        root=root,
        description=spec["description"],
        entry_name=entry["name"],
        entry_signature=" ".join(entry["signature"].split()),
        entry_args=tuple(entry["args"]),
        outputs=tuple(entry["outputs"]),
        dtypes=spec["dtypes"],
        tests=tuple(spec["tests"]),
        benchmarks=tuple(spec["benchmarks"]),
        rtol=float(spec["tolerance"]["rtol"]),
        atol=float(spec["tolerance"]["atol"]),
        trials=int(spec.get("trials", 1)),
        tolerance_by_target=_tolerances_by_target(spec.get("tolerance_by_target") or {}, spec["name"]),
        roofline_compute=spec["roofline"]["compute"],
        templates=tuple(templates),
        published_speed_of_light=spec.get("published_speed_of_light") or {},
        inputs=tuple(spec.get("inputs") or ("spec",)),
        imported=spec.get("imported") or {},
        shape_contract={k: {"multiple_of": 1, **v} for k, v in (spec.get("shape_contract") or {}).items()},
    )


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    atol_rms: float = 0.0
    acc_rtol: float = 0.0  # times (|A||B|^T)_ij, the sum of the absolute terms (ksci/evaluate/harness/check.py)


def _tolerances_by_target(spec: dict, problem: str) -> dict:
    known = {"rtol", "atol", "atol_rms", "acc_rtol", "profiles"}
    for target, override in spec.items():
        if target not in DIALECT_OF_TARGET or not isinstance(override, dict) or set(override) - known:
            raise ProblemError(
                f"problem {problem!r}: tolerance_by_target.{target} must be a target ({', '.join(DIALECT_OF_TARGET)})"
                f" mapped to some of {sorted(known)}"
            )
    return dict(spec)


def _template_from_spec(item: dict, dialect: str, root: Path) -> TemplateSpec:
    params = {k: list(v) for k, v in (item.get("params") or {}).items()}
    default = dict(item.get("default") or {})
    for key, value in default.items():
        if key not in params or value not in params[key]:
            raise ProblemError(f"template {item['name']!r}: default {key}={value!r} is not in its space")
    constraints = []
    for text in item.get("constraints") or []:
        try:
            constraints.append(parse_constraint(text, set(params)))
        except ConstraintError as exc:
            raise ProblemError(f"{dialect} template {item['name']!r}: constraint {text!r}: {exc}") from None
    path = _inside(root, item["file"])
    spec = TemplateSpec(item["name"], dialect, path, params, default, tuple(constraints), root)
    broken = spec.violations(default) if set(default) == set(params) else []
    if broken:
        raise ProblemError(f"{dialect} template {item['name']!r}: its default violates {', '.join(broken)}")
    return spec


def _inside(root: Path, relative: str) -> Path:
    """root/relative, refused when it leads out of the problem folder, through `..` (the schema refuses those) or a
    symbolic link: a template renders into a kernel, its compile log and the LLM's prompt."""
    path = root / relative
    if leads_outside(root, path):
        raise ProblemError(f"{root / 'problem.yaml'}: template file {relative!r} leads outside the problem folder")
    return path


def _dims(shape: dict) -> dict:
    return {k: v for k, v in shape.items() if k != "seed"}


def shape_key(shape: dict) -> str:
    """A readable, stable name for a shape: the dimensions joined by 'x' (seed left out)."""
    return "x".join(str(v) for k, v in shape.items() if k != "seed")


def has_entry_point(source: str, entry_name: str) -> bool:
    """Cheap textual check that the source defines the entry point with C linkage."""
    has_c_linkage = re.search(r'extern\s+"C"', source) is not None
    return has_c_linkage and re.search(rf"\b{re.escape(entry_name)}\s*\(", source) is not None
