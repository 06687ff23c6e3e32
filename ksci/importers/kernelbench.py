"""`ksci import kernelbench FILE.py`: a KernelBench problem (class Model, get_inputs, get_init_inputs, module-level
size constants) as a ksci problem folder.

The mapping (docs/problem-format.md, "Imported problems"):
- entry point `extern "C" int NAME(forward's inputs..., the model's parameters and floating-point buffers...,
  out, the int constants..., void* stream)`; every tensor a raw pointer, contiguous (row-major);
- the parameters are inputs drawn by generate_input: the model is built with its own initialisation under
  torch.manual_seed(seed), so a kernel sees the weights a KernelBench run would;
- shapes: the module's int constants. The benchmark is the file's own shape; the tests are a smaller shape (the
  constants that size a tensor divided by 8, 4 or 2, plus one to leave a tail, where the model still runs) and the
  benchmark shape;
- tolerance: KernelBench's own (torch.allclose with atol = rtol = 1e-2); vendor: torch.compile, eager where that
  fails.
What cannot be mapped (several outputs, an input changed in place, randomness in forward, non-tensor inputs,
unsupported dtypes) is an ImportFailure naming the construct; nothing is written then.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from pathlib import Path

import torch
import torch._dynamo  # noqa: F401 - imported before any time limit: an alarm inside a lazy import leaves it half-made
from torch.utils.flop_counter import FlopCounterMode

from ksci.importers import common
from ksci.importers.common import ImportedProblem, ImportFailure, TensorSpec, Unmappable, tensor_spec
from ksci.importers.gpumode_probe import probe_device
from ksci.importers.limits import time_limit
from ksci.importers.runtime import DEVICE_NOTE, build_model, execute, seeded
from ksci.problem.spec import kernels_dir

TOLERANCE = {"rtol": 1.0e-2, "atol": 1.0e-2}  # KernelBench: torch.allclose(output, ref, atol=1e-02, rtol=1e-02)
SHRINK = (8, 4, 2)
PROBE_SHRINK = (16, 64, 256, 1024)  # further shrink factors for the CPU's semantic check, tried in order
PROBE_FLOPS, PROBE_ELEMENTS = 2e9, 6e7  # the most a real CPU run at the probe shape may cost (meta-counted)
PROBE_LIMIT_S = 30.0  # where no shape is that cheap: the smallest test shape, run for real this long at most
MIN_SIZE = 8  # constants below this (kernel sizes, strides, a reduced dim's index) are never shrunk
TEST_SEEDS, BENCHMARK_SEED = (4242, 2121), 1001
REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def import_kernelbench(
    path: Path, name: str | None = None, dest: Path | None = None, replace: bool = False
) -> ImportedProblem | ImportFailure:
    try:
        return _import(Path(path), name, Path(dest) if dest else kernels_dir(), replace)
    except Unmappable as exc:
        return exc.failure


def _import(path: Path, requested: str | None, dest: Path, replace: bool) -> ImportedProblem:
    text = _read(path)
    name = common.problem_name(requested, path.stem)
    _PROBED.clear()
    ns = _execute(text, path)
    ints = _int_constants(text, ns)
    bench = dict(ints)
    model, inputs, out, _flops = _probe(ns, bench)
    names = _input_names(ns["Model"], len(inputs), set(ints))
    params = _parameter_names(model, set(names) | set(ints))
    output = "out" if "out" not in {*names, *params, *ints} else "output"
    state = model.state_dict()
    specs = [tensor_spec(n, t, "input") for n, t in zip(names, inputs, strict=True)]
    specs += [tensor_spec(p, state[key], "parameter") for p, key in params.items()]
    specs.append(tensor_spec(output, out, "output"))
    sizes = {d for t in specs[:-1] for d in t.shape}
    small = _smaller(ns, bench, sizes)
    tests = [bench] if small is None else [small, bench]
    cheap = _probe_shape(ns, bench, sizes, tests[0])
    try:
        with time_limit(None if cheap else PROBE_LIMIT_S, _Expired):
            checked = _check_semantics(ns, cheap or tests[0], names, params)
    except _Expired:
        checked = (
            f"not run: no shape costs under {PROBE_FLOPS:.0e} flops and {PROBE_ELEMENTS:.0e} elements, and the "
            f"smallest test shape ran over {PROBE_LIMIT_S:.0f} s on {probe_device()}; the harness's checks compare outputs"
        )
    rows = [_row(ns, shape, names, params) for shape in [bench, *tests[:-1]]]  # each shape once, the benchmark first
    parts = common.SpecParts(
        name=name,
        description=_description(path, ints, specs, names, params, output),
        tensors=specs,
        output=output,
        ints=list(ints),
        layouts={
            t.name: f"{' x '.join(map(str, t.shape)) or 'scalar'} at the benchmark shape, {t.layout}" for t in specs
        },
        tolerance=dict(TOLERANCE),
        tests=[{**s, "seed": TEST_SEEDS[i % len(TEST_SEEDS)]} for i, s in enumerate(tests)],
        benchmarks=[{**bench, "seed": BENCHMARK_SEED}],
        ranking="geomean",
        imported={**_provenance(path, text, names, params, rows), "semantics_checked": checked},
    )
    spec = common.problem_spec(parts)
    roles = [{"role": "benchmark and test", **rows[0]}, *({"role": "test", **r} for r in rows[1:])]
    files = {
        "problem.yaml": common.dump_yaml(spec),
        "reference.py": common.render(
            "reference.py.j2", problem=spec, fmt="kernelbench", module="runtime", cls="KernelBenchReference"
        ),
        "README.md": common.render("README.md.j2", problem=spec, fmt="KernelBench", rows=roles, source=path.name),
        f"imported/{path.name}": text,
    }
    root = common.write_problem(dest, name, files, replace)
    notes = [f"parameters as inputs: {', '.join(f'{p} = {k}' for p, k in params.items())}"] if params else []
    return ImportedProblem(name, root, len(spec["tests"]), len(spec["benchmarks"]), tuple(notes))


def _read(path: Path) -> str:
    if not path.is_file():
        raise Unmappable("no such file", str(path))
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise Unmappable("not Python", f"{path}: {exc}") from None
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [n for n in REQUIRED if n not in defined]
    if missing:
        raise Unmappable("not a KernelBench file", f"{path} defines no {', '.join(missing)} at module level")
    return text


def _execute(text: str, path: Path) -> dict:
    try:
        return execute(text, str(path))
    except Exception as exc:
        raise Unmappable("the file does not run", f"{type(exc).__name__}: {exc}") from None


def _int_constants(text: str, ns: dict) -> dict[str, int]:
    """Module-level `NAME = <int>` assignments, in the file's order: the problem's shape keys."""
    names = []
    for node in ast.parse(text).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
    # a negative constant (a clamp's bound, not a size) stays the file's value: shape keys are sizes
    ints = {n: ns[n] for n in dict.fromkeys(names) if type(ns.get(n)) is int and ns[n] >= 0}
    if not ints:
        raise Unmappable("no size constants", "the file has no module-level int constants to make the shape of")
    too_big = [f"{n} = {v}" for n, v in ints.items() if not -(2**31) <= v < 2**31]
    if too_big:
        raise Unmappable("constant beyond int32", f"{', '.join(too_big)}: the entry point takes ints")
    return ints


_PROBED: dict = {}  # one import's probes by shape: a slow meta run (an RNN's per-step loop) is paid once


def _probe(ns: dict, shape: dict, device: str = "meta", real: bool = True):
    """_probed, once per shape and source in one import."""
    key = (id(ns), tuple(sorted(shape.items())), device, real)
    if key not in _PROBED:
        _PROBED[key] = _probed(ns, shape, device, real)
    return _PROBED[key]


def _probed(ns: dict, shape: dict, device: str = "meta", real: bool = True):
    """The model, inputs and output at `shape` on meta tensors; where the model's __init__ reads values, built on
    the CPU and run on meta; where forward has an op with no meta kernel, run for real (`real`) on the probe
    device (a GPU where there is one)."""
    try:
        model, inputs = _build(ns, shape, device)
        for i, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                raise Unmappable("non-tensor input", f"get_inputs()[{i}] is a {type(value).__name__}, not a tensor")
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = model(*inputs)
    except Unmappable:
        raise
    except Exception as exc:
        if device == "meta":
            return _probed(ns, shape, "cpu>meta", real)
        if device == "cpu>meta" and real:  # the last resort: a real run at this shape
            return _probed(ns, shape, probe_device())
        raise Unmappable("the model does not run", f"at {shape}: {type(exc).__name__}: {exc}") from None
    if isinstance(out, tuple | list | dict):
        items = out.values() if isinstance(out, dict) else out
        kinds = ", ".join(_kind(v) for v in items)[:160]
        raise Unmappable(
            "several outputs",
            f"forward returns a {'tuple' if isinstance(out, tuple) else type(out).__name__} of {len(out)} ({kinds}); "
            "a KernelBench problem maps one tensor",
        )
    if not isinstance(out, torch.Tensor):
        raise Unmappable("non-tensor output", f"forward returns a {type(out).__name__}")
    return model, inputs, out, counter.get_total_flops()


def _build(ns: dict, shape: dict, device: str):
    """build_model on `device`; "cpu>meta": the model built on the CPU (its __init__ reads values, e.g. a
    drop-path schedule's .item()), then moved to meta with meta inputs: dims and flops without a real forward."""
    if device != "cpu>meta":
        return build_model(ns, shape, device)
    ns.update({k: v for k, v in shape.items() if k != "seed"})
    ns["_KSCI_DEVICE"] = "cpu"
    with torch.device("cpu"):
        model = ns["Model"](*ns["get_init_inputs"]())
    ns["_KSCI_DEVICE"] = "meta"
    with torch.device("meta"):
        inputs = list(ns["get_inputs"]())
    return model.to("meta"), inputs


def _probe_shape(ns: dict, bench: dict, sizes: set[int], test: dict) -> dict | None:
    """The shape the semantic check runs at for real: the smallest test shape, or the benchmark's constants that
    size a tensor shrunk further, whichever first costs at most PROBE_FLOPS and PROBE_ELEMENTS (None: none does)."""
    keys = [k for k, v in bench.items() if v >= MIN_SIZE and v in sizes]
    shrunk = [{k: (max(v // f, MIN_SIZE) if k in keys else v) for k, v in bench.items()} for f in PROBE_SHRINK]
    for shape in [test, *shrunk]:
        try:
            model, inputs, out, flops = _probe(ns, shape, "meta", real=False)
        except Unmappable:
            continue
        tensors = [*inputs, *model.state_dict().values(), out]
        elements = sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))
        if flops <= PROBE_FLOPS and elements <= PROBE_ELEMENTS:
            return shape
    return None


_DROPOUT = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout)


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)}"
    return type(value).__name__


def _input_names(model_class, count: int, taken: set[str]) -> list[str]:
    parameters = list(inspect.signature(model_class.forward).parameters.values())[1:]
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = named[:count] + [f"in{i}" for i in range(len(named), count)]
    return [n if n not in taken else f"in_{n}" for n in map(common.c_identifier, names)]


def _parameter_names(model: torch.nn.Module, taken: set[str]) -> dict[str, str]:
    """C name -> state_dict key, for the floating-point parameters and buffers (integer buffers stay the model's)."""
    names = {}
    for key, tensor in model.state_dict().items():
        if tensor.is_floating_point():
            name = common.c_identifier(key)
            names[name if name not in taken | set(names) else f"p_{name}"] = key
    return names


def _smaller(ns: dict, bench: dict, sizes: set[int]) -> dict | None:
    """A smaller shape for the tests: the constants that size a tensor shrunk, where the model still runs."""
    keys = [k for k, v in bench.items() if v >= MIN_SIZE and v in sizes]
    for factor in SHRINK:
        for tail in (1, 0):
            shape = {k: (v // factor + tail if k in keys else v) for k, v in bench.items()}
            if shape == bench:
                continue
            try:
                _probe(ns, shape, real=False)
            except Unmappable:
                continue
            return shape
    return None


class _Expired(BaseException):  # noqa: N818 - not an Exception: the model's own `except Exception` lets it pass
    """The semantic check's time is spent."""


def _check_semantics(ns: dict, shape: dict, names: list[str], params: dict) -> str:
    """On the probe device: forward must leave its inputs and parameters alone and give the same output twice.
    Returns where it was checked."""
    device = probe_device()  # a GPU where the importing machine has one, else the CPU
    with seeded(7, device):
        torch.manual_seed(7)
        model, inputs = build_model(ns, shape, device)
        parameters = dict(model.named_parameters())
        watched = {
            **dict(zip(names, inputs, strict=True)),
            **{p: parameters[k] for p, k in params.items() if k in parameters},
        }
        before = {n: t.detach().clone() for n, t in watched.items()}
        with torch.no_grad():
            torch.manual_seed(1)
            first = model(*inputs)
            changed = [n for n, t in watched.items() if not torch.equal(t.detach(), before[n])]
            if changed:
                raise Unmappable("in-place semantics", f"forward modifies {', '.join(changed)} in place")
            torch.manual_seed(2)
            second = model(*inputs)
    if not torch.allclose(first, second, rtol=0, atol=0, equal_nan=True):
        dropouts = [f"{n} (p={m.p})" for n, m in model.named_modules() if isinstance(m, _DROPOUT) and m.p > 0]
        why = (
            f"needs training mode: {', '.join(dropouts)[:120]} drops at random"
            if dropouts
            else "torch.rand or another draw inside forward"
        )
        raise Unmappable("randomness inside forward", f"two calls on the same inputs differ: {why}; no fixed reference")
    return f"on {device} at {shape}"


def _row(ns: dict, shape: dict, names: list[str], params: dict) -> dict:
    model, inputs, out, flops = _probe(ns, shape)
    state = model.state_dict()
    tensors = {**dict(zip(names, inputs, strict=True)), **{p: state[k] for p, k in params.items()}}
    moved = sum(t.numel() * t.element_size() for t in [*tensors.values(), out])
    return {
        "shape": dict(shape),
        "inputs": {n: list(t.shape) for n, t in tensors.items()},
        "output": list(out.shape),
        "flops": int(flops),
        "bytes": int(moved),
    }


def _description(path: Path, ints: dict, specs: list[TensorSpec], names: list, params: dict, output: str) -> str:
    """What the kernel computes, then each tensor as the entry point gets it (parameters named as in the model)."""
    constants = ", ".join(f"{k} = {v}" for k, v in ints.items())
    described = "\n".join(
        f"  {t.name}: {t.dtype}, dims {list(t.shape)} at the benchmark shape"
        + (f" (the model's {params[t.name]})" if t.name in params else "")
        for t in specs
    )
    return (
        f"KernelBench {path.name}: Model.forward as one kernel ({output} = forward({', '.join(names)})).\n"
        f"The source is imported/{path.name}; its class Model is the specification. Every tensor is contiguous\n"
        f"(row-major). The model's parameters are inputs, drawn by its own initialisation:\n{described}\n"
        f"The shape is the file's int constants, passed as ints after the tensors (benchmark: {constants}).\n"
    )


def _provenance(path: Path, text: str, names: list, params: dict, rows: list[dict]) -> dict:
    """problem.yaml's `imported` record: where the problem came from and how reference.py builds the model."""
    return {
        "format": "kernelbench",
        "source": path.name,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "rewritten": DEVICE_NOTE,
        "vendor": "torch.compile of Model.forward; eager PyTorch where it fails",
        "inputs": names,
        "params": params,
        "shapes": rows,
    }
