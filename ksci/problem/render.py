"""Render a problem's seed template at a point of its parameter space."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from ksci.problem.files import leads_outside
from ksci.problem.spec import ProblemError, TemplateSpec


class ProblemLoader(jinja2.FileSystemLoader):
    """A FileSystemLoader of one template folder that refuses a file (the template, or anything it includes,
    imports or extends) whose real path leads outside the problem folder `root`: a ProblemError of one line."""

    def __init__(self, folder: Path, root: Path, where: str) -> None:
        super().__init__(folder)
        self.root, self.where = root, where

    def get_source(self, environment: jinja2.Environment, template: str):
        for folder in self.searchpath:
            path = Path(folder, *jinja2.loaders.split_template_path(template))
            if os.path.lexists(path) and leads_outside(self.root, path):
                raise ProblemError(f"{self.where}: {template} is a link that leads outside the problem folder")
        return super().get_source(environment, template)


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
    header = _provenance(template, values)
    try:
        return header + _jinja_template(template).render(**values)
    except jinja2.TemplateError as exc:
        raise ProblemError(_template_failure(template, exc)) from None


def check_template(template: TemplateSpec) -> None:
    """Parse the template and what it includes, as rendering would: a Jinja syntax error or a missing file is a
    ProblemError of one line (`ksci evolve` checks its dialect's templates before Prefect starts)."""
    try:
        _jinja_template(template)
    except jinja2.TemplateError as exc:
        raise ProblemError(_template_failure(template, exc)) from None


def _jinja_template(template: TemplateSpec) -> jinja2.Template:
    root = template.root or template.path.parent
    where = f"{template.dialect} template {template.name!r}"
    env = jinja2.Environment(
        loader=ProblemLoader(template.path.parent, root, where),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(template.path.name)


def _template_failure(template: TemplateSpec, exc: jinja2.TemplateError) -> str:
    """`FILE:LINE: what Jinja says`, for the template itself or a file it includes."""
    where = f"{template.dialect} template {template.name!r}"
    if isinstance(exc, jinja2.TemplateSyntaxError):
        path = exc.filename or str(template.path)
        return f"{where}: {path}:{exc.lineno}: Jinja syntax error: {exc.message}"
    if isinstance(exc, jinja2.TemplateNotFound):
        return f"{where}: no template file {exc.name!r} in {template.path.parent}"
    return f"{where}: {template.path}: {type(exc).__name__}: {exc}"


def _provenance(template: TemplateSpec, values: dict) -> str:
    settings = " ".join(f"{k}={v}" for k, v in sorted(values.items()))
    return f"// ksci: rendered from {template.dialect}/{template.name} with {settings}\n"
