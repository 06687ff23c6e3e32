"""A task with several entry points as one: princeton's cross_entropy defines generate_inputs(batch_size,
vocab_size, seed) -> (logits, targets, grad_output) and reference_forward(logits, targets),
reference_backward(logits, targets, grad_output); its eval.py checks both and ranks by their combined time
(forward then backward, timed together).

The problem's kernel computes all of them: `generate_input(**shape)` is generate_inputs' tuple, `ref_kernel(data)`
returns each reference_*'s output in the order the source defines them (named by the suffix: forward, backward),
each called with the data items its parameters name (generate_inputs' `return a, b, c` names the items). The
tolerance is the source's RTOL and ATOL, which its eval.py compares with. An argument of generate_inputs that the
shapes do not give is fixed where eval.py's calls fix it (`B = 4_096` ... `generate_inputs(B, vocab_size)`) and
becomes a shape key of every shape, so the kernel is passed it.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable

from ksci.importers.common import Unmappable, c_identifier

PREFIX = "reference_"


def entries(ns: dict) -> list[str]:
    """The names of the source's reference_* functions, in the order it defines them."""
    return [n for n, v in ns.items() if n.startswith(PREFIX) and callable(v) and inspect.isfunction(v)]


def is_combined(ns: dict) -> bool:
    return not callable(ns.get("generate_input")) and callable(ns.get("generate_inputs")) and bool(entries(ns))


def combine(ns: dict, text: str, match_reference: Callable) -> None:
    """Add generate_input, ref_kernel and check_implementation (match_reference(ref_kernel, rtol, atol)) to `ns`,
    and the data's and outputs' names (`_ksci_data_names`, `_ksci_output_names`)."""
    names = returned_names(text, "generate_inputs")
    if names is None:
        raise Unmappable("several entry points", "generate_inputs does not return a tuple of names (return a, b, c)")
    functions = [ns[n] for n in entries(ns)]
    params = [list(inspect.signature(f).parameters) for f in functions]
    for name, wanted in zip(entries(ns), params, strict=True):
        unknown = [p for p in wanted if p not in names]
        if unknown:
            raise Unmappable("several entry points", f"{name} takes {', '.join(unknown)}, which generate_inputs lacks")
    tolerance = [ns.get(k) for k in ("RTOL", "ATOL")]
    if not all(isinstance(t, int | float) for t in tolerance):
        raise Unmappable("several entry points", "reference.py gives no RTOL and ATOL to compare its outputs with")

    def generate_input(**shape):
        return tuple(ns["generate_inputs"](**shape))

    def ref_kernel(data):
        items = dict(zip(names, data, strict=True))
        return tuple(f(*(items[p] for p in wanted)) for f, wanted in zip(functions, params, strict=True))

    ns.update(
        generate_input=generate_input,
        ref_kernel=ref_kernel,
        check_implementation=match_reference(ref_kernel, rtol=float(tolerance[0]), atol=float(tolerance[1])),
        _ksci_data_names=names,
        _ksci_output_names=[c_identifier(n.removeprefix(PREFIX)) for n in entries(ns)],
        _ksci_entries=entries(ns),
    )


def returned_names(text: str, function: str) -> list[str] | None:
    """The names `function` returns as a tuple (`return a, b, c`, its last return), or None."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
            if returns and isinstance(returns[-1], ast.Tuple):
                elts = returns[-1].elts
                if all(isinstance(e, ast.Name) for e in elts):
                    return [e.id for e in elts]
    return None


def fixed_arguments(generate_inputs: Callable, eval_text: str | None, keys: set[str]) -> dict[str, int]:
    """generate_inputs' arguments that the shapes (`keys`) leave out and that have no default, as eval.py's calls
    fix them: an int literal, or a module-level name bound to one. Unmappable where one is not fixed."""
    parameters = inspect.signature(generate_inputs).parameters
    needed = [p for p, v in parameters.items() if p not in keys and p != "seed" and v.default is v.empty]
    if not needed:
        return {}
    tree = ast.parse(eval_text) if eval_text else ast.Module(body=[], type_ignores=[])
    constants = {
        t.id: s.value.value
        for s in tree.body
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and type(s.value.value) is int
        for t in s.targets
        if isinstance(t, ast.Name)
    }
    found: dict[str, set[int]] = {}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and _called(call) == "generate_inputs":
            given = dict(zip(parameters, call.args, strict=False)) | {k.arg: k.value for k in call.keywords if k.arg}
            for name in needed:
                value = _int_of(given.get(name), constants)
                if value is not None:
                    found.setdefault(name, set()).add(value)
    unfixed = [n for n in needed if len(found.get(n, ())) != 1]
    if unfixed:
        raise Unmappable(
            "several entry points",
            f"generate_inputs takes {', '.join(unfixed)}, which neither task.yml's shapes nor one constant in "
            "eval.py's calls give",
        )
    return {name: found[name].pop() for name in needed}


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _int_of(node, constants: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None
