"""A gpu-mode task's files as the importer reads them: task.yml and reference.py checked and loaded (with the
shared utils.py/eval.py beside the task or one folder up, and task.py), the names ref_kernel gives its data and
outputs, and what identifies the task (its files' hash, the checkout's commit)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import subprocess
from pathlib import Path

import yaml

from ksci.importers import common
from ksci.importers.common import Unmappable
from ksci.importers.gpumode_entries import returned_names
from ksci.importers.gpumode_runtime import UTILS_NAMES, load_task

TEMPLATE_FILES = ("submission.py", "template.py")


def read_task(task_dir: Path) -> tuple[dict, str]:
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


def execute_task(task_dir: Path, text: str) -> dict:
    task_py = task_dir / "task.py"
    try:
        ns = load_task(task_dir / "reference.py", task_py if task_py.is_file() else None, beside(task_dir, "utils.py"))
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
        raise Unmappable(
            "several entry points",
            "reference.py defines generate_inputs but no ref_kernel and no reference_* function to run as one",
        )
    missing = [n for n in ("generate_input", "ref_kernel") if not callable(ns.get(n))]
    if missing:
        raise Unmappable("not a gpu-mode reference", f"reference.py defines no {', '.join(missing)}")
    return ns


def beside(task_dir: Path, filename: str) -> Path | None:
    """gpu-mode's shared file: in the task's folder, else one folder up (where the repository keeps it)."""
    for folder in (task_dir, task_dir.resolve().parent):
        if (folder / filename).is_file():
            return folder / filename
    return None


def defaults(function) -> dict:

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def data_names(text: str) -> list[str] | None:
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


def output_names(text: str, first: dict) -> list[str]:
    """The outputs' names: ref_kernel's `return a, b` where it returns names, else out, out1, ..."""
    count = len(first["outputs"])
    names = returned_names(text, "ref_kernel") if count > 1 else None
    if names is not None and len(names) == count:
        return [common.c_identifier(n) for n in names]
    return ["out"] if count == 1 else [f"out{i}" for i in range(count)]


def task_hash(task_dir: Path) -> str:
    """sha256 over the task's files and the shared utils.py/eval.py it runs with: changes when the task does."""
    digest = hashlib.sha256()
    files = sorted(p for p in task_dir.iterdir() if p.is_file())
    files += [p for p in (beside(task_dir, n) for n in UTILS_NAMES) if p and p.parent != task_dir]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def commit_of(task_dir: Path) -> str | None:
    """The git commit of the checkout the task is in, where it is one (else None: task_sha256 identifies it)."""

    try:
        done = subprocess.run(
            ["git", "-C", str(task_dir), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None
