"""A gpu-mode task's tensors as the entry point types them: its outputs named (a buffer's by its input), each
tensor's dtype and layout agreed over the shapes probed, the shape table's rows, and the layouts the description
gives."""

from __future__ import annotations

from dataclasses import replace

from ksci.importers.common import TensorSpec, Unmappable, tensor_spec


def named_outputs(kinds: dict[str, dict], leaves: list[str]) -> dict[str, dict]:
    """Each output under the name the entry point uses: a buffer's is its input's; a new one's not an input's."""
    named = {}
    for name, kind in kinds.items():
        if kind["from"] == "buffer":
            named[kind["data"]] = kind
            continue
        while name in leaves or name in named:
            name = f"{name}_out"
        named[name] = kind
    return named


def in_buffer_dims(outputs: dict[str, dict], probes: list[dict | None]) -> None:
    """Each probe's 0-dim output that a size-1 buffer holds (kind `scalar`) reshaped to the buffer's dims."""
    for p in {id(p): p for p in probes if p is not None}.values():
        leaves = dict(p["leaves"])
        p["outputs"] = [
            o.reshape(leaves[kind["data"]].shape) if kind.get("scalar") else o
            for kind, o in zip(outputs.values(), p["outputs"], strict=True)
        ]


def tensor_specs(probe: dict, outputs: dict[str, dict]) -> list[TensorSpec]:
    buffers = {kind["data"]: name for name, kind in outputs.items() if kind["from"] == "buffer"}
    specs = [tensor_spec(n, t, "output" if n in buffers else "input") for n, t in probe["leaves"]]
    for (name, kind), out in zip(outputs.items(), probe["outputs"], strict=True):
        if kind["from"] != "buffer":
            spec = tensor_spec(name, out, "output")  # refuses a layout with gaps or overlap
            specs.append(replace(spec, layout="row-major"))  # the kernel writes a dense buffer; values compared
    return specs


def shape_row(probe: dict, outputs: dict[str, dict]) -> dict:
    out_names = set(outputs)
    return {
        "shape": {k: v for k, v in probe["shape"].items() if k != "seed"},
        "seed": probe["shape"]["seed"],
        "inputs": {n: list(t.shape) for n, t in probe["leaves"] if n not in out_names},
        "outputs": {n: list(o.shape) for n, o in zip(outputs, probe["outputs"], strict=True)},
        "flops": probe["flops"],
        "bytes": int(probe["bytes"]),
    }


def agreed_specs(per_probe: list[list[TensorSpec]], probes: list[dict]) -> list[TensorSpec]:
    """The tensors' specs, the same at every shape; a layout from a shape where it tells (not N x 1 or 1 x 1)."""
    specs = list(per_probe[0])
    for theirs, one in zip(per_probe[1:], probes[1:], strict=True):
        same = [(t.name, t.dtype) for t in theirs] == [(t.name, t.dtype) for t in specs]
        for i, (mine, other) in enumerate(zip(specs, theirs, strict=False)):
            if mine.any_layout and not other.any_layout:
                specs[i] = replace(mine, layout=other.layout)
            elif not other.any_layout and mine.layout != other.layout:
                same = False
        if not same:
            where = {k: v for k, v in one["shape"].items() if k != "seed"}
            mine = {t.name: (t.dtype, t.layout) for t in specs}
            theirs_by = {t.name: (t.dtype, t.layout) for t in theirs}
            diff = [
                f"{n}: {mine.get(n)} vs {theirs_by.get(n)}"
                for n in {*mine, *theirs_by}
                if mine.get(n) != theirs_by.get(n)
            ]
            raise Unmappable(
                "tensors vary with the shape",
                f"at {where}: {'; '.join(sorted(diff))[:200]}: one entry point needs one dtype and layout per tensor",
            )
    return specs


def unambiguous(rows: list[dict]) -> None:
    """reference(inputs) finds its shape by the inputs' dims: equal dims must mean equal outputs."""
    rows = [r for r in rows if "inputs" in r]  # a deferred shape's dims are known where it runs
    for i, row in enumerate(rows):
        for other in rows[:i]:
            if row["inputs"] == other["inputs"] and row["outputs"] != other["outputs"]:
                raise Unmappable("ambiguous shapes", f"{row['shape']} and {other['shape']} have the same inputs")


def layouts_of(specs: list, outputs, first: dict, first_benchmark: bool) -> dict[str, str]:
    """Each tensor's shape and layout as the description gives them, at the first benchmark (or the first shape
    probed); an output the reference returns strided says so."""
    at = "the first benchmark" if first_benchmark else str({k: v for k, v in first["shape"].items() if k != "seed"})
    layouts = {t.name: f"{' x '.join(map(str, t.shape))} at {at}, {t.layout}" for t in specs}
    for output, tensor in zip(outputs, first["outputs"], strict=True):
        if output in layouts and not tensor.is_contiguous():
            layouts[output] += f" (the reference returns it with strides {tuple(tensor.stride())}; values compared)"
    return layouts
