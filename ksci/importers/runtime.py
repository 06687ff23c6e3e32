"""What an imported problem's reference.py calls: the source it was imported from, run for the harness.

An imported problem keeps its source verbatim under `imported/` (the sha256 in problem.yaml's `imported:` must
match). The source is executed in a namespace of its own, with its device strings pointed at the harness's device
(`on_device`), and adapted to the plain functions of docs/problem-format.md by KernelBenchReference and
GpuModeReference. Both importers probe the sources through the same code, so what the import checked is what the
harness runs. The table of shapes in `imported.shapes` (each shape's input and output dims, flops and bytes) lets
`reference(inputs)` tell the shape from the inputs, which is all it is given.
"""

from __future__ import annotations

import hashlib
import re
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml

_GENERATOR = re.compile(r"""torch\.Generator\(\s*(?:device\s*=\s*)?(["'])cuda(?::\d+)?\1\s*\)""")
_CUDA_CALL = re.compile(r"\.cuda\(\)")
_CUDA_STRING = re.compile(r"""(["'])cuda(?::\d+)?\1""")
_ANY_GENERATOR = re.compile(r"\btorch\.Generator\(")
_AVAILABLE = re.compile(r"\btorch\.cuda\.is_available\(\)")
DEVICE_NOTE = "device strings 'cuda' and .cuda() point at the harness's device"


def on_device(source: str) -> tuple[str, int]:
    """The source with `torch.Generator(device="cuda")`, `.cuda()` and the string "cuda" pointed at the device the
    caller chooses (_KSCI_DEVICE; meta and cpu get a CPU generator); and how many places were rewritten. Two more
    rewrites let a draw on meta tensors (the importer's dry run) stay on meta: `torch.cuda.is_available()` answers
    whether that device is other than the CPU (what it answers on the harness's GPU and on a CPU), and any other
    `torch.Generator(device=...)` gets a CPU generator for meta, where torch has none."""
    source, a = _GENERATOR.subn("_ksci_generator()", source)
    source, b = _CUDA_CALL.subn(".to(_KSCI_DEVICE)", source)
    source, c = _CUDA_STRING.subn("_KSCI_DEVICE", source)
    source, d = _ANY_GENERATOR.subn("_ksci_generator_on(", source)
    source, e = _AVAILABLE.subn("_ksci_accelerated()", source)
    return source, a + b + c + d + e


def execute(text: str, filename: str, modules: dict | None = None) -> dict:
    """Run a source in a namespace of its own, on the CPU until set_device; `modules` are importable meanwhile."""
    module = types.ModuleType(f"ksci_imported_{Path(filename).stem}")
    namespace = module.__dict__  # what the source runs in, and what callers set _KSCI_DEVICE in
    namespace.update(__file__=filename, _KSCI_DEVICE="cpu")

    def _ksci_generator() -> torch.Generator:
        device = torch.device(namespace["_KSCI_DEVICE"])
        return torch.Generator() if device.type in ("cpu", "meta") else torch.Generator(device=device)

    def _ksci_generator_on(device="cpu") -> torch.Generator:
        return torch.Generator() if torch.device(device).type == "meta" else torch.Generator(device=device)

    def _ksci_accelerated() -> bool:
        return torch.device(namespace["_KSCI_DEVICE"]).type != "cpu"

    namespace.update(
        _ksci_generator=_ksci_generator, _ksci_generator_on=_ksci_generator_on, _ksci_accelerated=_ksci_accelerated
    )
    code = compile(on_device(text)[0], filename, "exec")
    # registered while it runs: a dataclass looks its module up in sys.modules when it is defined
    with _importable({**(modules or {}), module.__name__: module}):
        exec(code, module.__dict__)
    return module.__dict__


@contextmanager
def _importable(modules: dict):
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def seeded(seed: int, device):
    """torch's generators seeded with `seed` inside, restored after (the device's too)."""
    device = torch.device(device)
    devices = [device.index or 0] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices)


class ImportedReference:
    """The parts both formats share: the spec, the verified source, the shape table, the vendor's fallback."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.spec = yaml.safe_load((self.root / "problem.yaml").read_text())
        self.meta = self.spec["imported"]
        path = self.root / "imported" / self.meta["source"]
        text = path.read_text()
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest != self.meta["sha256"]:
            raise ValueError(f"{path} changed since it was imported (sha256 {digest[:12]}): import it again")
        self.text, self.path = text, path
        self.outputs = list(self.spec["entry_point"]["outputs"])
        self.compiled: dict = {}

    def row(self, shape: dict) -> dict:
        """The shape table's row of `shape` (its keys other than seed)."""
        wanted = {k: v for k, v in shape.items() if k != "seed"}
        for row in self.meta["shapes"]:
            if row["shape"] == wanted:
                return row
        raise KeyError(f"shape {wanted} is not in the imported problem's table: import the problem again")

    def row_of_inputs(self, inputs: dict) -> dict:
        """The row whose input dims are those of `inputs`: the importer made them unique per shape."""
        dims = {name: list(t.shape) for name, t in inputs.items() if name not in self.outputs}
        for row in self.meta["shapes"]:
            if row.get("inputs") == dims:
                return row
        raise KeyError(f"no shape of the imported problem has inputs of these dims: {dims}")

    def flops(self, shape: dict) -> float:
        return float(self.row(shape)["flops"])

    def bytes_moved(self, shape: dict) -> float:
        return float(self.row(shape)["bytes"])

    def vendor_call(self, key: str, eager, args: tuple):
        """torch.compile of `eager` (once per shape), or `eager` itself where compiling or running it fails."""
        compiled = self.compiled.get(key)
        if compiled is None:
            try:
                compiled = torch.compile(eager, dynamic=False)
                compiled(*args)
            except Exception as exc:  # no compiler, an op inductor cannot lower: eager PyTorch is the baseline
                print(f"vendor: torch.compile failed ({type(exc).__name__}); eager PyTorch instead", file=sys.stderr)
                compiled = eager
            self.compiled[key] = compiled
        return compiled(*args)


class KernelBenchReference(ImportedReference):
    """A KernelBench file: Model(*get_init_inputs()), forward(*get_inputs()), module-level int constants as shape."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.ns = execute(self.text, str(self.path))
        self.models: dict = {}

    def set_shape(self, shape: dict, device) -> None:
        self.ns.update({k: v for k, v in shape.items() if k != "seed"})
        self.ns["_KSCI_DEVICE"] = str(device)

    def build(self, shape: dict, device) -> tuple[torch.nn.Module, list]:
        return build_model(self.ns, shape, device)

    def generate_input(self, shape: dict, seed: int, target: str, device) -> dict:
        with seeded(seed, device):
            torch.manual_seed(seed)
            model, inputs = self.build(shape, device)
        tensors = dict(zip(self.meta["inputs"], inputs, strict=True))
        state = model.state_dict()
        tensors.update({name: state[key].detach() for name, key in self.meta["params"].items()})
        dims = self.row(shape)["output"]
        out = self.spec["dtypes"][target][self.outputs[0]]
        tensors[self.outputs[0]] = torch.full(dims, float("nan"), dtype=getattr(torch, out), device=device)
        return tensors

    def _call(self, inputs: dict):
        row = self.row_of_inputs(inputs)
        device = next(iter(inputs.values())).device
        key = f"{sorted(row['shape'].items())}@{device}"
        model = self.models.get(key)
        if model is None:
            model, _ = self.build(row["shape"], device)
            self.models[key] = model
        self.set_shape(row["shape"], device)
        state = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}  # updates land here
        state.update({key: inputs[name] for name, key in self.meta["params"].items()})
        args = tuple(inputs[name] for name in self.meta["inputs"])
        return key, model, state, args

    def reference(self, inputs: dict) -> dict:
        _key, model, state, args = self._call(inputs)
        with torch.no_grad():
            return {self.outputs[0]: torch.func.functional_call(model, state, args)}

    def vendor(self, inputs: dict):
        key, model, state, args = self._call(inputs)

        def forward(*args):
            return torch.func.functional_call(model, state, args)

        def run() -> dict:
            with torch.no_grad():
                return {self.outputs[0]: self.vendor_call(key, forward, args)}

        return run


def build_model(ns: dict, shape: dict, device) -> tuple[torch.nn.Module, list]:
    """A KernelBench source's Model(*get_init_inputs()) and get_inputs() at `shape`, made on `device` (seed torch's
    generators first for a deterministic draw)."""
    ns.update({k: v for k, v in shape.items() if k != "seed"})
    ns["_KSCI_DEVICE"] = str(device)
    with torch.device(device):
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = list(ns["get_inputs"]())
    return model, inputs


def module_of(name: str, namespace: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__")})
    return module


def __getattr__(name: str):
    """A reference.py written by an older `ksci import gpumode` imports its class from here: say what to do."""
    if name in ("GpuModeReference", "MatchReference", "utils_module"):
        raise ImportError(
            f"{name} is in ksci.importers.gpumode_runtime: this problem was imported by an older ksci; import its "
            "task again (ksci import gpumode TASK_DIR --force)"
        )
    raise AttributeError(name)
