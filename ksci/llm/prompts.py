"""Prompt templates: Jinja files `<stage>.system.j2` and `<stage>.user.j2`, looked up in the user's override
folder first (config `prompts_dir`, or KSCI_PROMPTS_DIR), then in templates/prompts/. StrictUndefined: a template
that names a value the stage does not provide fails loudly instead of sending a prompt with a hole in it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import jinja2

from ksci import PROJECT_ROOT
from ksci.problem.contract import hide_held_out

PROMPTS_DIR = PROJECT_ROOT / "templates" / "prompts"
# The most a rendered message may hold (about 60k tokens): what each stage puts in is bounded (findings, listings,
# feedback tails), and this bounds the sum, whatever the Base's source or an override template adds.
MAX_MESSAGE_CHARS = 240_000


@lru_cache(maxsize=8)
def _environment(override: str | None) -> jinja2.Environment:
    folders = [override] if override else []
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([*folders, str(PROMPTS_DIR)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_messages(stage: str, values: dict, prompts_dir: str | Path | None = None) -> list[dict]:
    """The stage's chat messages (system, user) rendered from its templates with `values`."""
    override = prompts_dir or os.environ.get("KSCI_PROMPTS_DIR")
    env = _environment(str(override) if override else None)
    return [
        {"role": role, "content": bounded(_rendered(env, f"{stage}.{role}.j2", values)) + "\n"}
        for role in ("system", "user")
    ]


def _rendered(env: jinja2.Environment, name: str, values: dict) -> str:
    """A template rendered, with any held-out shape a verdict names hidden (ksci.problem.contract.hide_held_out)."""
    return hide_held_out(env.get_template(name).render(**values).strip())


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` within `limit` characters: its head and tail kept (instructions open a prompt, the task closes it),
    the middle replaced by a line saying how much was left out."""
    if len(text) <= limit:
        return text
    keep = (limit - 100) // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters left out of this prompt ...]\n{text[-keep:]}"


def stage_marker(stage: str) -> str:
    """The first line of every stage's system prompt (the scripted test server recognises stages by it)."""
    return f"[ksci stage: {stage}]"
