"""What a gpu-mode problem's reference.py runs: the task's reference.py beside its utils.py (and task.py), as
gpu-mode's runner places them, adapted to the harness's plain functions.

utils.py: gpu-mode keeps it one folder up, beside the tasks; the importer keeps a copy under imported/ and runs the
task's own. Four of its names are replaced, so that what a check_implementation compares with becomes the
problem's tolerance: make_match_reference returns a MatchReference (its rtol/atol), and verbose_allclose,
verbose_allequal and match_reference record the tolerance they are called with (allequal: 0, 0) and report no
mismatch. The harness compares outputs itself (ksci/evaluate/harness/check.py); it never calls check_implementation.
"""

from __future__ import annotations

import ast
import re
import types
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from ksci.importers.gpumode_data import flatten, rebuild
from ksci.importers.gpumode_entries import combine, is_combined
from ksci.importers.gpumode_shapes import decode
from ksci.importers.runtime import ImportedReference, execute, module_of, seeded

UTILS_NAMES = ("utils.py", "eval.py")


class MatchReference:
    """What gpu-mode's utils.make_match_reference returns, standing in for it: the tolerance is what counts."""

    def __init__(self, reference, rtol: float = 1e-05, atol: float = 1e-08) -> None:
        self.reference, self.rtol, self.atol = reference, rtol, atol

    def __call__(self, data, output):
        expected = self.reference(data)
        pairs = zip(output, expected, strict=True) if isinstance(expected, tuple) else [(output, expected)]
        ok = all(torch.allclose(o.float(), e.float(), rtol=self.rtol, atol=self.atol) for o, e in pairs)
        return ok, "" if ok else "mismatch"


def utils_module(path: Path | None = None) -> types.ModuleType:
    """gpu-mode's utils.py at `path` (a stand-in with the names references import, where there is none), with the
    comparisons replaced by recorders: `module._ksci_tolerances` collects (rtol, atol) per call."""
    namespace = execute(path.read_text(), str(path)) if path else {"DeterministicContext": nullcontext}
    module = module_of("utils", namespace)
    calls: list[tuple[float, float]] = []

    def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, *args, **kwargs):
        calls.append((float(rtol), float(atol)))
        return []

    def verbose_allequal(received, expected, *args, **kwargs):
        calls.append((0.0, 0.0))
        return []

    def match_reference(data, output, reference=None, rtol=1e-05, atol=1e-08):
        calls.append((float(rtol), float(atol)))
        return True, ""

    module.__dict__.update(
        make_match_reference=lambda reference, **kwargs: MatchReference(reference, **kwargs),
        verbose_allclose=verbose_allclose,
        verbose_allequal=verbose_allequal,
        match_reference=match_reference,
        _ksci_tolerances=calls,
    )
    module.__dict__.setdefault("set_seed", torch.manual_seed)
    module.__dict__.setdefault("DeterministicContext", nullcontext)
    return module


def load_task(reference: Path, task_py: Path | None, utils_py: Path | None) -> dict:
    """The reference's namespace, with `task` and `utils` importable while it loads."""
    modules = {"utils": utils_module(utils_py)}
    if task_py is not None and task_py.is_file():
        modules["task"] = module_of("task", execute(task_py.read_text(), str(task_py), dict(modules)))
    text = reference.read_text()
    ns = execute(text, str(reference), modules)
    ns["_ksci_utils"] = modules["utils"]
    ns["_ksci_device_names"] = device_names(text)
    if is_combined(ns):  # generate_inputs and reference_forward, reference_backward, ...: one entry point
        combine(ns, text, MatchReference)
    return ns


def device_names(text: str) -> list[str]:
    """Module-level names bound to the string "cuda" (`DEVICE = "cuda"`): draw() points them at its device."""
    return [
        target.id
        for statement in ast.parse(text).body
        if isinstance(statement, ast.Assign)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
        and re.fullmatch(r"cuda(:\d+)?", statement.value.value)
        for target in statement.targets
        if isinstance(target, ast.Name)
    ]


def draw(ns: dict, shape: dict, cases: dict, device) -> object:
    """generate_input at `shape` (int-encoded cases decoded) on `device`, torch's default generators seeded too."""
    ns["_KSCI_DEVICE"] = str(device)
    ns.update(dict.fromkeys(ns.get("_ksci_device_names", ()), str(device)))
    kwargs = decode(shape, cases)
    validate = torch.distributions.Distribution._validate_args
    if str(device) == "meta":  # a distribution's argument checks read values
        torch.distributions.Distribution.set_default_validate_args(False)
    try:
        with seeded(shape["seed"], device), torch.device(device):  # a tensor made without a device goes there too
            torch.manual_seed(shape["seed"])
            return ns["generate_input"](**kwargs)
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)


def as_outputs(result, names: list[str]) -> dict:
    results = list(result) if isinstance(result, tuple | list) else [result]
    return dict(zip(names, results, strict=True))


class GpuModeReference(ImportedReference):
    """A gpu-mode task: generate_input(**shape, seed) -> data, ref_kernel(data) -> output(s)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        utils = self.root / "imported" / "utils.py"
        task = self.root / "imported" / "task.py"
        self.ns = load_task(self.path, task, utils if utils.is_file() else None)
        self.cases = self.meta.get("cases", {})
        self.kinds = self.meta["outputs"]  # name -> {"dtype", "from": "new" | "buffer" | "copy", "data": name}
        if self.meta.get("check") == "task":  # the harness asks the task's check_implementation, not a tolerance
            self.verdict = self._task_verdict

    def _task_verdict(self, inputs: dict, outputs: dict) -> tuple[bool, str]:
        """The task's check_implementation(data, output) on the kernel's outputs (one, or a tuple in order)."""
        _key, data = self._data(inputs)
        got = [outputs[n].reshape(()) if k.get("scalar") else outputs[n] for n, k in self.kinds.items()]
        with torch.no_grad():
            verdict = self.ns["check_implementation"](data, got[0] if len(got) == 1 else tuple(got))
        ok, message = verdict if isinstance(verdict, tuple) else (bool(verdict), "")
        return bool(ok), str(message)

    def row(self, shape: dict) -> dict:
        """The shape's row; a shape the importer deferred (too slow to probe there) is measured here, once."""
        row = super().row(shape)
        if row.get("deferred") and "inputs" not in row:
            self._complete(row)
        return row

    def _complete(self, row: dict) -> None:
        """A deferred row's input and output dims, flops and bytes, from one draw and one reference run here."""
        device = "cuda" if torch.cuda.is_available() else "cpu"
        data = draw(self.ns, {**row["shape"], "seed": row["seed"]}, self.cases, device)
        leaves = dict(flatten(data, self.meta["names"]))
        self.ns["_KSCI_DEVICE"] = device
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            outputs = as_outputs(self.ns["ref_kernel"](data), list(self.kinds))
        outputs = {
            n: o.reshape(leaves[self.kinds[n]["data"]].shape) if self.kinds[n].get("scalar") else o
            for n, o in outputs.items()
        }
        row["inputs"] = {n: list(t.shape) for n, t in leaves.items() if n not in self.kinds}
        row["outputs"] = {n: list(o.shape) for n, o in outputs.items()}
        row["flops"] = int(counter.get_total_flops())
        tensors = [*leaves.values(), *(o for n, o in outputs.items() if self.kinds[n]["from"] != "buffer")]
        row["bytes"] = int(sum(t.numel() * t.element_size() for t in tensors))

    def row_of_inputs(self, inputs: dict) -> dict:
        try:
            return super().row_of_inputs(inputs)
        except KeyError:  # a deferred shape not drawn in this process yet
            for row in self.meta["shapes"]:
                if row.get("deferred") and "inputs" not in row:
                    self._complete(row)
            return super().row_of_inputs(inputs)

    def generate_input(self, shape: dict, seed: int, target: str, device) -> dict:
        data = draw(self.ns, {**shape, "seed": seed}, self.cases, device)
        tensors = dict(flatten(data, self.meta["names"]))
        for name, dtype in self.meta.get("casts", {}).items():  # one dtype per input (gpumode_casts.py)
            tensors[name] = tensors[name].to(getattr(torch, dtype))
        row = self.row(shape)
        for name, kind in self.kinds.items():
            if kind["from"] != "buffer":  # a new output, or the written copy of an input: a buffer of its own
                dtype = getattr(torch, self.spec["dtypes"][target][name])
                tensors[name] = poisoned(row["outputs"][name], dtype, device)
        return tensors

    def _data(self, inputs: dict) -> tuple[str, object]:
        row = self.row_of_inputs(inputs)
        device = next(iter(inputs.values())).device
        self.ns["_KSCI_DEVICE"] = str(device)
        buffers = {kind["data"]: name for name, kind in self.kinds.items() if kind["from"] == "buffer"}
        copies = {kind["data"] for kind in self.kinds.values() if kind["from"] == "copy"}
        tensors = []
        for name in self.meta["data"]:
            if name in buffers:  # the preallocated output: a new one, in its layout
                tensors.append(
                    _fresh(
                        row["outputs"][buffers[name]],
                        self.meta["strides"][buffers[name]],
                        device,
                        getattr(torch, self.kinds[buffers[name]]["dtype"]),
                    )
                )
            else:
                tensors.append(inputs[name].clone() if name in copies else inputs[name])
        if self.meta["structured"]:
            template = draw(self.ns, {**row["shape"], "seed": row["seed"]}, self.cases, device)
            data = rebuild(template, tensors, self.meta["names"])
        else:
            data = tuple(tensors) if self.meta["data_is_tuple"] else tensors[0]
        return f"{sorted(row['shape'].items())}@{device}", data

    def reference(self, inputs: dict) -> dict:
        _key, data = self._data(inputs)
        with torch.no_grad():
            return self._shaped(as_outputs(self.ns["ref_kernel"](data), list(self.kinds)), inputs)

    def vendor(self, inputs: dict):
        key, data = self._data(inputs)

        def run() -> dict:
            with torch.no_grad():
                result = as_outputs(self.vendor_call(key, self.ns["ref_kernel"], (data,)), list(self.kinds))
            return self._shaped(result, inputs)

        return run

    def _shaped(self, outputs: dict, inputs: dict) -> dict:
        """A 0-dim output that a size-1 buffer holds (kind `scalar`) in the buffer's dims, as the kernel writes it."""
        scalar = [n for n, k in self.kinds.items() if k.get("scalar")]
        if scalar:
            row = self.row_of_inputs(inputs)
            outputs.update({n: outputs[n].reshape(row["outputs"][n]) for n in scalar})
        return outputs


def _fresh(dims: list[int], strides: list[int], device, dtype) -> torch.Tensor:
    return torch.empty_strided(dims, strides, dtype=dtype, device=device)


def poisoned(dims: list[int], dtype: torch.dtype, device) -> torch.Tensor:
    """An output buffer a kernel must overwrite: NaN, or an integer dtype's largest value."""
    fill = float("nan") if dtype.is_floating_point else (True if dtype == torch.bool else torch.iinfo(dtype).max)
    return torch.full(dims, fill, dtype=dtype, device=device)
