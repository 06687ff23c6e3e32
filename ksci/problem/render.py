"""Render a problem's seed template at a point of its parameter space."""

from __future__ import annotations

import jinja2

from ksci.problem.spec import ProblemError, TemplateSpec


def check_params(template: TemplateSpec, params: dict) -> dict:
    """Fill defaults and reject names or values outside the template's declared space."""
    unknown = sorted(set(params) - set(template.params))
    if unknown:
        raise ProblemError(f"template {template.name!r} has no parameter(s) {', '.join(unknown)}")
    merged = {**template.default, **params}
    for name, value in merged.items():
        if value not in template.params[name]:
            allowed = ", ".join(map(str, template.params[name]))
            raise ProblemError(f"template {template.name!r}: {name}={value!r} is not one of [{allowed}]")
    missing = sorted(set(template.params) - set(merged))
    if missing:
        raise ProblemError(f"template {template.name!r}: no value or default for {', '.join(missing)}")
    return merged


def render_kernel(template: TemplateSpec, params: dict | None = None) -> str:
    values = check_params(template, params or {})
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template.path.parent),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    header = _provenance(template, values)
    return header + env.get_template(template.path.name).render(**values)


def _provenance(template: TemplateSpec, values: dict) -> str:
    settings = " ".join(f"{k}={v}" for k, v in sorted(values.items()))
    return f"// ksci: rendered from {template.dialect}/{template.name} with {settings}\n"
