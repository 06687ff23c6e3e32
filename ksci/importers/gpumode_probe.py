"""Running a gpu-mode task's reference to learn its tensors and check what cannot be mapped.

Each shape is run on meta tensors first (no memory, no time). A reference that reads values (`.item()`, a copy to
the host, data-dependent indexing) fails there and is run for real, on a GPU where the importing machine has one,
else on the CPU. The semantic checks (deterministic generation, inputs left alone, one output for one input) run
for real at the smallest test shape, on that same device. All real runs of one import share REAL_LIMIT_S seconds;
past it the import is refused, saying where it would finish.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

import torch
from torch.utils.flop_counter import FlopCounterMode

from ksci.importers.common import Unmappable
from ksci.importers.gpumode_data import constants_of, flatten
from ksci.importers.gpumode_runtime import MatchReference, draw
from ksci.importers.limits import time_limit

REAL_LIMIT_S = 120.0


class Expired(BaseException):  # noqa: N818 - not an Exception: the reference's own `except Exception` lets it pass
    """The real-run time is spent."""


def probe_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class Budget:
    """The seconds left for real runs in one import; a run past them is refused (SIGALRM, main thread only)."""

    def __init__(self, seconds: float = REAL_LIMIT_S) -> None:
        self.total, self.deadline = seconds, time.monotonic() + seconds

    @contextmanager
    def real(self, where: str):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.refusal(where)
        try:
            with time_limit(left, Expired):
                yield
        except Expired:
            raise self.refusal(where) from None

    def refusal(self, where: str) -> Unmappable:
        return Unmappable(
            "reference too slow to probe",
            f"real runs of the reference on {probe_device()} ({where}) took over {self.total:.0f} s in all: "
            "import it on a machine with a GPU (the real runs use it)",
        )


def run_reference(ns: dict, data, device: str):
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = ns["ref_kernel"](data)
    return out, int(counter.get_total_flops())


def probe(ns: dict, shape: dict, cases: dict, names: list[str] | None, budget: Budget) -> dict:
    """One shape: the data's tensors, the outputs, flops, bytes and the tolerance check_implementation uses."""
    try:
        data = draw(ns, shape, cases, "meta")
        out, flops = run_reference(ns, data, "meta")
        device = "meta"
    except Unmappable:
        raise
    except Exception:  # a reference that reads values: run it for real
        device = probe_device()
        try:
            with budget.real(f"shape {shape}"):
                data = draw(ns, shape, cases, device)
                out, flops = run_reference(ns, data, device)
        except Unmappable:
            raise
        except Exception as exc:
            raise Unmappable("the reference does not run", f"at {shape}: {type(exc).__name__}: {exc}"[:300]) from None
    outputs = list(out) if isinstance(out, tuple | list) else [out]
    for i, value in enumerate(outputs):
        if not isinstance(value, torch.Tensor):
            raise Unmappable("non-tensor output", f"ref_kernel's output {i} is a {type(value).__name__}")
    leaves = flatten(data, names)
    if not leaves:
        raise Unmappable("no tensor input", "generate_input returns no tensor")
    constants_of(data)  # refuses an object it cannot walk
    moved = sum(t.numel() * t.element_size() for _, t in leaves)
    moved += sum(o.numel() * o.element_size() for o in outputs if not any(aliased(o, t) for _, t in leaves))
    return {
        "shape": shape,
        "data": data,
        "leaves": leaves,
        "outputs": outputs,
        "flops": flops,
        "bytes": moved,
        "tolerance": tolerance(ns, data, out),
        "structured": not (
            isinstance(data, torch.Tensor)
            or (isinstance(data, tuple | list) and all(isinstance(d, torch.Tensor) for d in data))
        ),
        "packed": isinstance(data, tuple | list),
        "device": device,
    }


def tolerance(ns: dict, data, out) -> tuple[float, float] | None:
    """(rtol, atol) that check_implementation compares with: make_match_reference's, or the loosest of the
    verbose_allclose / verbose_allequal / match_reference calls it makes. None: it compares with none of them (it
    checks properties of the output, as linalg's tasks do), so the task's own check is the verdict (own_check)."""
    check = ns.get("check_implementation")
    if isinstance(check, MatchReference):
        return float(check.rtol), float(check.atol)
    calls = ns["_ksci_utils"]._ksci_tolerances if "_ksci_utils" in ns else []
    calls.clear()
    if callable(check):
        try:
            with torch.no_grad():
                check(data, out)
        except Exception:
            calls.clear()
    if not calls:
        if not callable(check):
            raise Unmappable("no check_implementation", "reference.py defines no check_implementation to compare with")
        return None
    return max(c[0] for c in calls), max(c[1] for c in calls)


def own_check(ns: dict, shape: dict, cases: dict, names: list[str] | None, budget: Budget) -> str:
    """The task's check_implementation as the verdict: it must accept ref_kernel's own output at `shape` (a real
    run); returns its message."""
    with budget.real(f"the task's own check at {shape}"):
        data = draw(ns, shape, cases, probe_device())
        with torch.no_grad():
            out = ns["ref_kernel"](data)
            verdict = ns["check_implementation"](draw(ns, shape, cases, probe_device()), out)
    ok, message = verdict if isinstance(verdict, tuple) else (bool(verdict), "")
    if not ok:
        raise Unmappable("the task's check rejects its reference", f"at {shape}: {str(message)[:200]}")
    return str(message)


def smallest(shapes: list[dict]) -> dict:
    return min(shapes, key=lambda s: math.prod(max(v, 1) for k, v in s.items() if k != "seed"))


def aliased(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same tensor, or views of the same memory with the same dims (a module's buffer read back)."""
    if a is b:
        return True
    if a.device.type == "meta" or a.device != b.device or a.dtype != b.dtype:
        return False
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (NaNs in the same places equal too), without widening a large tensor."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)) if a.numel() else True


class Semantics:
    """The checks that need real values, at one shape on the probe device: generate_input deterministic for a
    seed, ref_kernel deterministic, and what it does with the inputs it writes or leaves unread."""

    def __init__(self, ns: dict, shape: dict, cases: dict, names: list[str] | None) -> None:
        self.ns, self.shape, self.cases, self.names = ns, shape, cases, names
        self.device = probe_device()
        self.zeroed: set[str] = set()  # uninitialised buffers (differ between draws): zeroed before a call

    def draw(self, fill: dict | None = None):
        data = draw(self.ns, self.shape, self.cases, self.device)
        leaves = dict(flatten(data, self.names))
        for name in self.zeroed:
            leaves[name].zero_()
        for name, value in (fill or {}).items():
            leaves[name].fill_(value)
        return data, leaves

    def call(self, data) -> list[torch.Tensor]:
        with torch.no_grad():
            out = self.ns["ref_kernel"](data)
        return list(out) if isinstance(out, tuple | list) else [out]

    def kinds(self, out_names: list[str]) -> dict[str, dict]:
        """Per output: {"from": "new"} or {"from": "buffer" | "copy", "data": the input it is}."""
        data, leaves = self.draw()
        before = {n: t.clone() for n, t in leaves.items()}
        again_data, again = self.draw()
        self.zeroed = {n for n, t in again.items() if not same(t, before[n])}
        for name in self.zeroed:  # both draws as draw() hands them from here on: called, not drawn again
            for tensors in (leaves, before, again):
                tensors[name].zero_()
        first = self.call(data)
        aliases = {i: n for i, o in enumerate(first) for n, t in leaves.items() if aliased(o, t)}
        first = [o.clone() for o in first]
        changed = {n for n, t in leaves.items() if not same(t, before[n])}
        del data, leaves, before
        second = self.call(again_data)
        del again_data, again
        if not all(same(a, b) for a, b in zip(first, second, strict=True)):
            raise Unmappable("randomness inside ref_kernel", "two calls on the same data differ: no fixed reference")
        kinds = {name: {"from": "new"} for name in out_names}
        for i, leaf in aliases.items():
            overwritten = self._unread(leaf, first)
            kinds[out_names[i]] = {"from": "buffer" if overwritten else "copy", "data": leaf}
        for leaf in changed - set(aliases.values()):
            raise Unmappable("in-place semantics", f"ref_kernel modifies its input {leaf} in place and returns it not")
        for leaf in sorted(self.zeroed - set(aliases.values())):
            self._adopt(leaf, first, kinds, out_names)
        return kinds

    def _unread(self, leaf: str, first: list[torch.Tensor]) -> bool:
        """ref_kernel's outputs do not depend on the tensor's values (it only writes it)."""
        outputs = self.call(self.draw({leaf: 1.0})[0])
        return all(same(a, b) for a, b in zip(first, outputs, strict=True))

    def _adopt(self, leaf: str, first: list, kinds: dict, out_names: list[str]) -> None:
        """An uninitialised buffer (torch.empty: it differs between two draws) that ref_kernel does not read is
        where gpu-mode's submission writes its result: the output of its shape and dtype, if there is one; a size-1
        buffer for a 0-dim output too (pmpp_v2 vectorsum's sum), the output then given in the buffer's dims."""
        if not self._unread(leaf, first):
            raise Unmappable("randomness in generate_input", f"two draws with the same seed differ in {leaf}")
        data, leaves = self.draw()
        for i, name in enumerate(out_names):
            out, buffer = first[i], leaves[leaf]
            if kinds[name]["from"] == "new" and out.shape == buffer.shape:
                kinds[name] = {"from": "buffer", "data": leaf}
                return
            if kinds[name]["from"] == "new" and out.dim() == 0 and buffer.numel() == 1 and out.dtype == buffer.dtype:
                kinds[name] = {"from": "buffer", "data": leaf, "scalar": True}  # a size-1 buffer for a 0-dim output
                return
        raise Unmappable(
            "randomness in generate_input",
            f"{leaf} is left uninitialised (it differs between two draws with the same seed), is not read by "
            "ref_kernel and has the shape of no output",
        )
