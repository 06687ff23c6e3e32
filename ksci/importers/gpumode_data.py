"""A gpu-mode task's data and output as the flat list of tensors a kernel is handed, and back.

`generate_input` may return a tensor, or a tuple, list or dict of them, nested, with dataclass instances and
`nn.Module`s inside (amd mla-decode's Config and KVCache, amd moe's dict of weights and its config dict).
`flatten` walks that structure: every tensor is a leaf named by its path (`kv_cache.data`, `config.wo_weight`);
everything else (ints, strings, None, tuples of ints) stays in the structure as a constant of the shape. A run of
dict entries whose keys differ only by an integer (`experts.0.0.weight`, `experts.1.0.weight`, ...) and whose
tensors have one shape and dtype is one stacked tensor (`experts_0_weight`, shape [count, ...]), so the number of
kernel arguments does not vary with a count in the shape. `rebuild` puts tensors back into a structure drawn at the
same shape (the constants come from there), unstacking the runs.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable

import torch

from ksci.importers.common import Unmappable, c_identifier

_DIGITS = re.compile(r"\d+")
Leaf = tuple[str, object]  # the path of a tensor and the tensor (or, for a stacked run, the list of its keys)


def flatten(data, names: list[str] | None = None) -> list[tuple[str, torch.Tensor]]:
    """(argument name, tensor) for every tensor of `data`, in order; `names` name the top-level items."""
    items = list(data) if isinstance(data, tuple | list) else [data]
    names = names if names and len(names) == len(items) else [f"in{i}" for i in range(len(items))]
    leaves: list[tuple[str, torch.Tensor]] = []
    for name, item in zip(names, items, strict=True):
        _walk(item, [name], leaves)
    return _unique(leaves)


def _walk(value, path: list[str], leaves: list) -> None:
    if isinstance(value, torch.Tensor):
        leaves.append(("_".join(path), value))
    elif isinstance(value, dict):
        for label, stacked in _runs(value).items():
            if isinstance(stacked, torch.Tensor) and label not in value:
                leaves.append(("_".join([*path, label]), stacked))
            else:
                _walk(stacked, [*path, label], leaves)
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            _walk(item, [*path, str(i)], leaves)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), [*path, f.name], leaves)
    elif isinstance(value, torch.nn.Module):
        for name, tensor in _module_tensors(value):
            leaves.append(("_".join([*path, name.replace(".", "_")]), tensor))


def _module_tensors(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(dict(module.named_buffers(remove_duplicate=False)))
    return [(name, tensor.detach()) for name, tensor in named.items()]


def _runs(mapping: dict) -> dict:
    """The dict's entries, with each run of same-shaped tensors under integer-indexed keys stacked into one."""
    groups: dict[str, list[str]] = {}
    for key, value in mapping.items():
        if isinstance(key, str) and _DIGITS.search(key) and isinstance(value, torch.Tensor):
            groups.setdefault(_DIGITS.sub("*", key, count=1), []).append(key)
    out, stacked_keys = {}, set()
    for pattern, keys in groups.items():
        first = mapping[keys[0]]
        if len(keys) > 1 and all(mapping[k].shape == first.shape and mapping[k].dtype == first.dtype for k in keys):
            label = re.sub(r"\W+", "_", pattern.replace("*", "")).strip("_") or "stacked"
            out[label] = torch.stack([mapping[k] for k in keys])
            stacked_keys.update(keys)
    for key, value in mapping.items():
        if key not in stacked_keys:
            out[str(key)] = value
    return out


def _unique(leaves: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    seen: dict[str, int] = {}
    named = []
    for name, tensor in leaves:
        name = c_identifier(name)
        count = seen.get(name, 0)
        seen[name] = count + 1
        named.append((f"{name}_{count}" if count else name, tensor))
    return named


def rebuild(template, tensors: list[torch.Tensor], names: list[str] | None = None):
    """`template` (a draw at the same shape) with its tensors replaced, in flatten's order, by `tensors`."""
    items = list(template) if isinstance(template, tuple | list) else [template]
    queue = list(tensors)
    rebuilt = [_put(item, queue) for item in items]
    if queue:
        raise ValueError(f"{len(queue)} tensors left over rebuilding the data: import the problem again")
    if isinstance(template, tuple | list):
        return type(template)(rebuilt) if isinstance(template, tuple) else rebuilt
    return rebuilt[0]


def _put(value, queue: list):
    if isinstance(value, torch.Tensor):
        return queue.pop(0)
    if isinstance(value, dict):
        return _put_dict(value, queue)
    if isinstance(value, tuple | list):
        items = [_put(v, queue) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _put(getattr(value, f.name), queue) for f in _init_fields(value)})
    if isinstance(value, torch.nn.Module):
        return _put_module(value, queue)
    return value


def _init_fields(value) -> list:
    return [f for f in dataclasses.fields(value) if f.init]


def _put_dict(mapping: dict, queue: list) -> dict:
    runs = _runs(mapping)
    out = {}
    for label, item in runs.items():
        if isinstance(item, torch.Tensor) and label not in mapping:  # a stacked run: its keys in order
            stacked = queue.pop(0)
            keys = [k for k in mapping if isinstance(k, str) and _label(k) == label]
            out.update(dict(zip(keys, stacked.unbind(0), strict=True)))
        else:
            out[label] = _put(item, queue)
    return {key: out[str(key)] for key in mapping}


def _label(key: str) -> str:
    return re.sub(r"\W+", "_", _DIGITS.sub("", key, count=1)).strip("_") or "stacked"


def _put_module(module: torch.nn.Module, queue: list) -> torch.nn.Module:
    fresh = copy.copy(module)
    fresh._parameters, fresh._buffers, fresh._modules = dict(module._parameters), dict(module._buffers), {}
    for name, child in module._modules.items():
        fresh._modules[name] = child
    for name, _tensor in _module_tensors(module):
        owner = fresh
        *parents, leaf = name.split(".")
        for parent in parents:
            child = copy.copy(owner._modules[parent])
            child._parameters, child._buffers = dict(child._parameters), dict(child._buffers)
            owner._modules[parent] = child
            owner = child
        tensor = queue.pop(0)
        if leaf in owner._parameters:
            owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
        else:
            owner._buffers[leaf] = tensor
    return fresh


def constants_of(data) -> object:
    """The data with every tensor replaced by its dims: what must not change with the seed at one shape."""
    return _map(data, lambda t: ("tensor", tuple(t.shape), str(t.dtype)))


def _map(value, fn: Callable):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_map(v, fn) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _map(getattr(value, f.name), fn) for f in dataclasses.fields(value)}
    if isinstance(value, torch.nn.Module):
        return {n: fn(t) for n, t in _module_tensors(value)} | {
            k: v for k, v in vars(value).items() if isinstance(v, int | float | str | bool) and k != "training"
        }
    if isinstance(value, int | float | str | bool | type(None)):
        return value
    raise Unmappable("non-tensor input", f"generate_input returns a {type(value).__name__} inside its data")
