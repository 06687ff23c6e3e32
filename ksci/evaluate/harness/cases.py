"""The harness child's input sets: inputs, outputs between canary regions, poison, and the check of one set.

A candidate's output is written into the middle of one allocation whose two ends hold canary bytes, so a write
outside the output shows; the output is poisoned (NaN, or -1) before every call, so a call that skips its work
shows. The child (ksci/evaluate/harness/child.py) makes a Case per input set, calls the candidate on it and asks
it to verify itself.
"""

from __future__ import annotations

import torch

from ksci.evaluate.harness.check import compare, same_bytes, summary
from ksci.problem.spec import Tolerance

GUARD_ELEMENTS = 4096  # canary elements on each side of every output
GUARD_BYTE = 0x5A


class Case:
    """One input set: inputs, guarded and poisoned outputs and pristine input copies.

    The expected output is not kept: it is computed only in verify(), after the device is idle and the
    candidate's output has been copied out, and wiped and released right after the comparison, so no candidate
    call ever runs while the answer sits in device memory (docs/threat-model.md).
    """

    def __init__(
        self, problem, ref, shape: dict, seed: int, target: str, device, keep_pristine: bool = True, profile="spec"
    ):
        """keep_pristine=False (timed input sets, most never checked in full): no copy of the inputs is kept;
        verify() draws them again from the seed (generate_input is deterministic for a seed). `profile`: the input
        profile drawn (problem.yaml `inputs`)."""
        self.shape, self.seed, self.problem, self.ref = shape, seed, problem, ref
        self.target, self.device, self.profile = target, device, profile
        tensors = draw(ref, shape, seed, target, device, profile)
        self.inputs = {k: v for k, v in tensors.items() if k not in problem.outputs}
        self.pristine = {k: v.clone() for k, v in self.inputs.items()} if keep_pristine else None
        self.buffers, self.outputs = {}, {}
        for name in problem.outputs:
            self.buffers[name], self.outputs[name] = _guarded_like(tensors[name])
        self.tensors = {**self.inputs, **self.outputs}
        self.poison()

    def poison(self) -> None:
        for out in self.outputs.values():
            out.fill_(float("nan") if out.is_floating_point() else -1)

    def left_poison(self) -> bool:
        """Whether a floating-point output still holds NaN (the poison) anywhere: a cheap look at every output."""
        return any(out.is_floating_point() and bool(torch.isnan(out).any()) for out in self.outputs.values())

    def drawn_again(self) -> dict:
        fresh = draw(self.ref, self.shape, self.seed, self.target, self.device, self.profile)
        return {k: v for k, v in fresh.items() if k in self.inputs}

    def _magnitude(self, pristine: dict, name: str):
        """The reference module's sum of |terms| of output `name`, made only if compare asks (None: it has none)."""
        if not hasattr(self.ref, "magnitude"):
            return None
        return lambda: self.ref.magnitude(dict(pristine))[name]

    def nbytes(self) -> int:
        tensors = [*self.inputs.values(), *(self.pristine or {}).values(), *self.buffers.values()]
        return sum(t.numel() * t.element_size() for t in tensors)

    def verify(self, tolerance: Tolerance, release: bool = True) -> dict:
        """Outputs within tolerance (or, where the reference has a `verdict`, accepted by it: an imported task's
        own check), inputs bitwise unchanged, guard bytes intact."""
        torch.cuda.synchronize()  # every stream, not only the harness's: nothing of the candidate's still runs
        got = {name: out.clone() for name, out in self.outputs.items()}
        pristine = self.pristine if self.pristine is not None else self.drawn_again()
        verdict = getattr(self.ref, "verdict", None)
        if verdict is not None:
            result = self._verdict(verdict, pristine, got, release)
        else:
            result = self._compare(tolerance, pristine, got, release)
        if not result["ok"]:
            return result
        for name, tensor in self.inputs.items():
            if not same_bytes(tensor, pristine[name]):
                return {**result, "ok": False, "report": f"the kernel modified its input {name!r}"}
        for name, buffer in self.buffers.items():
            if not _guards_intact(buffer, self.outputs[name].numel()):
                return {**result, "ok": False, "report": f"the kernel wrote outside its output {name!r}"}
        return result

    def _compare(self, tolerance: Tolerance, pristine: dict, got: dict, release: bool) -> dict:
        expected = self.ref.reference(dict(pristine))
        try:
            result = {}
            for name in self.problem.outputs:
                tol = (tolerance.rtol, tolerance.atol, tolerance.atol_rms, tolerance.acc_rtol)
                result = compare(got[name], expected[name], *tol, self._magnitude(pristine, name))
                if not result["ok"]:
                    return {**result, "report": f"output {name!r}: {result['report']}"}
        finally:
            _wipe(expected, got, release=release)
        return result

    def _verdict(self, verdict, pristine: dict, got: dict, release: bool) -> dict:
        """The reference's own check of the outputs (on copies of the inputs: it may not touch the originals)."""
        copies = {k: v.clone() for k, v in pristine.items()}
        try:
            ok, message = verdict(copies, got)
            total = sum(t.numel() for t in got.values())
            nonfinite = sum(int((~torch.isfinite(t)).sum()) for t in got.values() if t.is_floating_point())
        finally:
            _wipe(copies, got, release=release)
        report = "" if ok else f"the task's check: {message}"[:500]
        return summary(ok, 0 if ok else total, total, 0.0, nonfinite, report)


def draw(ref, shape: dict, seed: int, target: str, device, profile: str = "spec") -> dict:
    """reference.generate_input for one input set; `profile` is passed only when it is not `spec`, so a reference
    that knows no profiles (an imported problem's) is called as before."""
    if profile == "spec":
        return ref.generate_input(shape, seed, target, device)
    return ref.generate_input(shape, seed, target, device, profile=profile)


def _wipe(*groups: dict, release: bool = True) -> None:
    """Zero the expected output and the copies, then (release) hand the memory back to the driver.

    Zeroing covers the tensors themselves; empty_cache returns the reference's freed intermediates (its float32
    product, for one) to the driver, so a later allocation by the candidate cannot find them in torch's cache.
    Timed outputs are checked without the release: every later call gets input values drawn after this check, so
    an answer left in the cache answers nothing it will be asked (and the batches' allocations stay cheap).
    """
    for group in groups:
        for tensor in group.values():
            tensor.zero_()
        group.clear()
    torch.cuda.synchronize()
    if release:
        torch.cuda.empty_cache()


def _guarded_like(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A contiguous tensor like t, placed between two canary regions of one allocation (the output is poisoned by
    the caller, so only the canaries are written here)."""
    buffer = torch.empty(t.numel() + 2 * GUARD_ELEMENTS, dtype=t.dtype, device=t.device)
    buffer[:GUARD_ELEMENTS].view(torch.uint8).fill_(GUARD_BYTE)
    buffer[GUARD_ELEMENTS + t.numel() :].view(torch.uint8).fill_(GUARD_BYTE)
    return buffer, buffer[GUARD_ELEMENTS : GUARD_ELEMENTS + t.numel()].view(t.shape)


def _guards_intact(buffer: torch.Tensor, numel: int) -> bool:
    raw = buffer.view(torch.uint8)
    width = GUARD_ELEMENTS * buffer.element_size()
    edges = torch.cat([raw[:width], raw[width + numel * buffer.element_size() :]])
    return bool((edges == GUARD_BYTE).all())
