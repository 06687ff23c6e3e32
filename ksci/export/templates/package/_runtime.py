"""The op's machinery, driven by spec.json (written by `ksci export`): the checks of the inputs against the problem's
dtypes, layouts and shape contract, the outputs' allocation, and the call of the kernel library's C entry point with
ctypes (tensors as device pointers, integer dimensions, torch's current stream), as ksci's harness calls it."""

from __future__ import annotations

import ctypes
import json
import os
from importlib import resources

import torch

HERE = resources.files(__package__)
SPEC = json.loads(HERE.joinpath("spec.json").read_text())
OP = f"{SPEC['namespace']}::{SPEC['entry']}"
_ENTRIES: dict[str, ctypes._CFuncPtr] = {}  # the entry point of each architecture's library, loaded once
# The layouts' dimension expressions (integer Python over the shape's keys), compiled once: every call evaluates them.
_CODE = {e: compile(e, "<layout>", "eval") for t in SPEC["tensors"] for e in t["dims"]}


def _inputs() -> list[dict]:
    return [t for t in SPEC["tensors"] if t["name"] not in SPEC["outputs"]]


def _outputs() -> list[dict]:
    return [t for t in SPEC["tensors"] if t["name"] in SPEC["outputs"]]


def dimensions(tensors: dict) -> dict:
    """The shape's keys read off the inputs, every input checked against them; ValueError naming what is wrong."""
    shape = {}
    for spec in _inputs():
        t = tensors[spec["name"]]
        if t.dtype != getattr(torch, spec["dtype"]):
            raise ValueError(f"{OP}: {spec['name']} must be {spec['dtype']}, not {str(t.dtype).removeprefix('torch.')}")
        if t.dim() != len(spec["dims"]):
            raise ValueError(f"{OP}: {spec['name']} must have {len(spec['dims'])} dimensions ({_wanted(spec)})")
        for axis, expr in enumerate(spec["dims"]):
            if expr in SPEC["contract"] and expr not in shape:
                shape[expr] = int(t.shape[axis])
    for name, rule in SPEC["contract"].items():
        value = shape[name]
        if not (rule["minimum"] <= value <= rule["maximum"] and value % rule["multiple"] == 0):
            raise ValueError(
                f"{OP}: {name}={value} is outside the shape contract ({name} a multiple of {rule['multiple']} "
                f"from {rule['minimum']} to {rule['maximum']}; pad or split the input)"
            )
    for spec in _inputs():
        t = tensors[spec["name"]]
        wanted = [_size(expr, shape) for expr in spec["dims"]]
        if list(t.shape) != wanted:
            raise ValueError(f"{OP}: {spec['name']} is {tuple(t.shape)}, expected {tuple(wanted)} ({_wanted(spec)})")
        if not _in_order(t, spec["order"]):
            raise ValueError(f"{OP}: {spec['name']} must be {spec['order']}-major with no gaps ({_wanted(spec)})")
    return shape


def _size(expr: str, shape: dict) -> int:
    return int(eval(_CODE[expr], {"__builtins__": {}}, shape))  # noqa: S307 - the problem's layout, checked at export


def _wanted(spec: dict) -> str:
    return f"{spec['layout']}, {spec['dtype']}"


def _in_order(t: torch.Tensor, order: str) -> bool:
    return t.is_contiguous() if order == "row" else t.permute(*reversed(range(t.dim()))).is_contiguous()


def empty_outputs(shape: dict, device: torch.device) -> dict:
    """Each output allocated in its layout."""
    return {spec["name"]: empty(spec, shape, device) for spec in _outputs()}


def empty_inputs(shape: dict, device: torch.device) -> dict:
    """Each input allocated (not filled) in its layout: for checks of shapes, e.g. on the meta device."""
    return {spec["name"]: empty(spec, shape, device) for spec in _inputs()}


def empty(spec: dict, shape: dict, device: torch.device) -> torch.Tensor:
    """A tensor of spec.json's `tensors` at `shape`, in its memory order (column-major: a contiguous transpose)."""
    dims = [_size(expr, shape) for expr in spec["dims"]]
    dtype = getattr(torch, spec["dtype"])
    if spec["order"] == "row":
        return torch.empty(dims, dtype=dtype, device=device)
    return torch.empty(list(reversed(dims)), dtype=dtype, device=device).permute(*reversed(range(len(dims))))


def run(tensors: dict) -> dict:
    """Check, allocate the outputs, compute them: the kernel library, or the test stand-in where spec.json says so."""
    shape = dimensions(tensors)
    device = next(iter(tensors.values())).device
    if any(t.device != device for t in tensors.values()):
        raise ValueError(
            f"{OP}: every input must be on one device (found {sorted({str(t.device) for t in tensors.values()})})"
        )
    outputs = empty_outputs(shape, device)
    if SPEC["backend"] == "test-stand-in":
        return _test_stand_in(tensors, outputs)
    if device.type != "cuda":
        raise ValueError(f"{OP}: the inputs must be on a GPU, not {device}")
    _call_kernel({**tensors, **outputs}, shape, device)
    return outputs


def _call_kernel(tensors: dict, shape: dict, device: torch.device) -> None:
    entry = _entry(device)
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        args = []
        for name in SPEC["args"]:
            if name == "stream":
                args.append(ctypes.c_void_p(stream))
            elif name in tensors:
                args.append(ctypes.c_void_p(tensors[name].data_ptr()))
            else:
                args.append(ctypes.c_int(shape[name]))
        code = entry(*args)
    if code != 0:
        raise RuntimeError(f"{OP}: the kernel returned error code {code} on {shape}")


def device_arch(device: torch.device) -> str:
    """gfx942 on ROCm, sm_90 on CUDA (where torch's properties also carry a `gcnArchName`: the device's name)."""
    props = torch.cuda.get_device_properties(device)
    if torch.version.hip:
        return str(props.gcnArchName).split(":")[0]
    return f"sm_{props.major}{props.minor}"


def _entry(device: torch.device) -> ctypes._CFuncPtr:
    """The entry point of the library built for this GPU's architecture (sm_90a serves sm_90), loaded once, after
    torch's GPU runtime (the library takes the runtime's functions from the libcudart / libamdhip64 torch loaded)."""
    arch = device_arch(device)
    if arch not in _ENTRIES:
        built = {a.removesuffix("a"): path for a, path in SPEC["libraries"].items()}
        if arch not in built:
            raise RuntimeError(
                f"{OP}: no library for this GPU ({arch}); this package was built for {', '.join(SPEC['libraries'])}"
            )
        torch.cuda.init()
        library = ctypes.CDLL(os.fspath(HERE.joinpath(built[arch])), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        entry = getattr(library, SPEC["entry"])
        entry.restype = ctypes.c_int
        _ENTRIES[arch] = entry
    return _ENTRIES[arch]


def _test_stand_in(tensors: dict, outputs: dict) -> dict:
    """TEST STAND-IN, NOT THE KERNEL: a package exported with the simulator's stand-in (ksci's CPU tests) computes
    the outputs with the problem's reference.py, on any device, so that its build, import and checks can be tried
    without a GPU. Nothing it computes says anything about the kernel."""
    from . import reference

    expected = reference.reference(dict(tensors))
    for name, out in outputs.items():
        out.copy_(expected[name])
    return outputs
