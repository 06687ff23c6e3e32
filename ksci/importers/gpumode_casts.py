"""An input whose dtype differs between a task's cases (bioml trimul's mask: float32 ones where `nomask`, an int64
draw of 0 and 1 elsewhere), handed to the kernel in one dtype.

The entry point has one dtype per tensor. Where an input's dtype varies between the shapes probed, the problem
takes torch's promotion of them (float32 for float32 and int64) and the harness casts each draw to it before the
kernel and the reference see it (`imported.casts`). The import checks that this changes nothing, on real tensors at
the smallest probed shape of each other dtype: the cast values read back exactly, and ref_kernel's outputs on the
cast data are bitwise those on the task's own. An output whose dtype varies is still refused.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from ksci.importers.common import SUPPORTED_DTYPES, TensorSpec, Unmappable
from ksci.importers.gpumode_data import flatten, rebuild
from ksci.importers.gpumode_probe import Budget, probe_device, same
from ksci.importers.gpumode_runtime import draw


def common_dtypes(per_probe: list[list[TensorSpec]], outputs) -> dict[str, str]:
    """input name -> the dtype its varying dtypes promote to (only inputs whose dtype varies between probes)."""
    seen: dict[str, set[str]] = {}
    for specs in per_probe:
        for spec in specs:
            if spec.name not in outputs:
                seen.setdefault(spec.name, set()).add(spec.dtype)
    casts = {}
    for name, dtypes in seen.items():
        if len(dtypes) > 1:
            promoted = getattr(torch, sorted(dtypes)[0])
            for dtype in sorted(dtypes)[1:]:
                promoted = torch.promote_types(promoted, getattr(torch, dtype))
            target = str(promoted).removeprefix("torch.")
            if target in SUPPORTED_DTYPES:
                casts[name] = target
    return casts


def agree(per_probe: list[list[TensorSpec]], casts: dict[str, str]) -> list[list[TensorSpec]]:
    """The specs with each cast input in its common dtype."""
    return [[replace(s, dtype=casts[s.name]) if s.name in casts else s for s in specs] for specs in per_probe]


def verify(ns: dict, casts: dict[str, str], probes: list[dict], cases: dict, names, budget: Budget) -> None:
    """Each cast changes neither the values nor ref_kernel's outputs, at the smallest probed shape of each other
    dtype (a real run on the probe device); Unmappable where it does."""
    for name, target in casts.items():
        others: dict[str, dict] = {}
        for p in probes:
            dtype = str(dict(p["leaves"])[name].dtype).removeprefix("torch.")
            if dtype != target and (dtype not in others or _size(p) < _size(others[dtype])):
                others[dtype] = p
        for dtype, p in others.items():
            shape = p["shape"]
            with budget.real(f"the cast of {name} at {shape}"):
                problem = _check(ns, shape, cases, names, name, getattr(torch, target))
            if problem:
                where = {k: v for k, v in shape.items() if k != "seed"}
                raise Unmappable(
                    "tensors vary with the shape",
                    f"{name} is {dtype} at {where} and {target} elsewhere; as {target} {problem}: one entry point "
                    "needs one dtype per tensor",
                )


def _size(p: dict) -> int:
    return sum(math.prod(t.shape) for _, t in p["leaves"])


def _check(ns: dict, shape: dict, cases: dict, names, name: str, target: torch.dtype) -> str:
    """'' where the cast of `name` to `target` keeps its values and ref_kernel's outputs; else what differs."""
    device = probe_device()
    data = draw(ns, shape, cases, device)
    leaves = flatten(data, names)
    tensor = dict(leaves)[name]
    if not same(tensor.to(target).to(tensor.dtype), tensor):
        return "its values change"
    cast = rebuild(data, [t.to(target) if n == name else t for n, t in leaves], names)
    with torch.no_grad():
        expected = _outputs(ns["ref_kernel"](draw(ns, shape, cases, device)))
        got = _outputs(ns["ref_kernel"](cast))
    if len(got) != len(expected) or not all(same(a, b) for a, b in zip(got, expected, strict=True)):
        return "ref_kernel's outputs change"
    return ""


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple | list) else [out]
