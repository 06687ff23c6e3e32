"""A run's identity: the problem, target and settings that define it and a hash of each seed template it may use,
kept as `identity.json` beside its lineage (STORE/RUN/identity.json) when the run starts.

Why: `ksci evolve --run mix` on top of a finished run with another problem or other settings used to append to the
same generations silently (rc 0), and `ksci status` then compared an fp8 best with an rmsnorm seed. A template
changed between two invocations is the quiet form of the same mistake: old rows lacking a newer parameter are read
with today's defaults, so an old kernel's times are credited to a new point. So `--run` with another identity is
refused, naming the difference. A run without the file (a store older than it) is accepted, and gets one.

Not part of the identity: generations, children, limits, budgets, GPUs, overlap, racing and the seed, nor a
simulator recording's environment faults. Continuing a run with more generations or another seed adds comparable
candidates; those settings say how far and how fast it goes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jinja2.meta

from ksci.lineage.store import LineageStore
from ksci.problem.spec import DIALECT_OF_TARGET, Problem, TemplateSpec

IDENTITY_FILE = "identity.json"
VERSION = 1


@dataclass(frozen=True)
class RunIdentity:
    problem: str
    target: str
    arch: str | None  # None: the GPU's own (as the command gave it)
    proposer: str
    strategy: str
    timings: str  # "measured", "simulated (made-up)" or "simulated (recording NAME sha256 ...)"
    templates: dict[str, str] = field(default_factory=dict)  # "cuda/mma" -> sha256 (file, includes, its space)

    def differences(self, wanted: RunIdentity) -> list[str]:
        """What `wanted` asks for that this (the run's) identity is not, in words; [] when they agree."""
        found = []
        for name in ("problem", "target", "arch", "proposer", "strategy", "timings"):
            have, want = getattr(self, name), getattr(wanted, name)
            if have != want:
                found.append(f"{name} {want or 'default'} (the run has {have or 'default'})")
        if self.problem != wanted.problem or self.target != wanted.target:
            return found  # other templates follow; they would only repeat it
        for template in sorted(set(self.templates) | set(wanted.templates)):
            have, want = self.templates.get(template), wanted.templates.get(template)
            if have != want:
                how = "is new" if have is None else "is gone" if want is None else "has changed since the run started"
                found.append(f"template {template} {how}")
        return found

    def summary(self) -> str:
        arch = f" ({self.arch})" if self.arch else ""
        return f"{self.problem} on {self.target}{arch}, {self.proposer} proposer, {self.strategy}, {self.timings}"

    def to_json(self) -> str:
        return json.dumps({"version": VERSION, **asdict(self)}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RunIdentity:
        values = json.loads(text)
        values.pop("version", None)
        return cls(**values)


def identity_of(
    problem: Problem, target: str, arch: str | None, proposer: str, strategy: str, simulate: str | None
) -> RunIdentity:
    """The identity of a run with these settings, hashing the templates of the target's dialect as they are now."""
    templates = {f"{t.dialect}/{t.name}": template_digest(t) for t in problem.templates_for(DIALECT_OF_TARGET[target])}
    return RunIdentity(problem.name, target, arch, proposer, strategy, _timings(simulate), templates)


def template_digest(template: TemplateSpec) -> str:
    """sha256 of the template file, of every file it includes or imports (a shared core behind a symlink too), and
    of its declared space (params, default, constraints): a change to any of them changes what a point renders."""
    digest = hashlib.sha256()
    space = {
        "params": template.params,
        "default": template.default,
        "constraints": [c.text for c in template.constraints],
    }
    digest.update(json.dumps(space, sort_keys=True).encode())
    for path in _template_files(template.path):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(missing)")
    return digest.hexdigest()


def _template_files(path: Path) -> list[Path]:
    """The template and what it references, transitively, by name in its folder (as the renderer's loader finds
    them); an unparsable template stands for itself (rendering reports its error)."""
    seen, todo = [], [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        try:
            parsed = jinja2.Environment().parse(current.read_text())
        except (OSError, UnicodeDecodeError, jinja2.TemplateSyntaxError):
            continue
        todo.extend(path.parent / name for name in jinja2.meta.find_referenced_templates(parsed) if name)
    return seen


def _timings(simulate: str | None) -> str:
    if simulate is None:
        return "measured"
    if not simulate:
        return "simulated (made-up)"
    path = Path(simulate)
    text = _recorded_results(path.read_bytes() if path.is_file() else b"")
    return f"simulated (recording {path.name} sha256 {hashlib.sha256(text).hexdigest()[:16]})"


def _recorded_results(text: bytes) -> bytes:
    """A recording's entries without its environment faults (`environment_error`: a GPU that went away), as the
    identity hashes them: like the GPUs a run uses, the environment is not what the run is, and a generation retried
    once its GPU is back (the recording's fault removed) is the same run. Anything that does not read as a list of
    entries is hashed as it is."""
    try:
        entries = json.loads(text)
    except ValueError:
        return text
    if not isinstance(entries, list):
        return text
    kept = [e for e in entries if not (isinstance(e, dict) and e.get("status") == "environment_error")]
    return json.dumps(kept, sort_keys=True).encode()


def read_identity(store: LineageStore, run: str) -> RunIdentity | None:
    """The run's recorded identity, None when it has none; ValueError (one line) for a file that does not read."""
    path = store.storage.path(run, IDENTITY_FILE)
    if not store.storage.exists(path):
        return None
    try:
        return RunIdentity.from_json(store.storage.read_bytes(path).decode())
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{path} does not read ({exc}); move it away to continue the run with today's settings"
        ) from None


def write_identity(store: LineageStore, run: str, identity: RunIdentity) -> None:
    store.storage.write_atomic(store.storage.path(run, IDENTITY_FILE), lambda f: f.write(identity.to_json().encode()))


def claim_run(store: LineageStore, run: str, identity: RunIdentity) -> str | None:
    """Check `identity` against the run's and record it: the refusal in one line when the run holds candidates of
    another identity, else None (the identity written when the run had none, or had no candidate yet)."""
    recorded = read_identity(store, run)
    if recorded == identity:
        return None
    has_rows = store.storage.exists(store.storage.path(run, "candidates"))
    if recorded is not None and has_rows:
        different = "; ".join(recorded.differences(identity))
        return (
            f"run {run!r} is {recorded.summary()}; this command asks for {different}. Start a new run (leave out "
            "--run, or give a new name), or continue this one with its own settings"
        )
    write_identity(store, run, identity)
    return None


def refusal_to_run(store_root: str, run: str, identity: RunIdentity) -> str | None:
    """Why a run cannot start or continue, in one line (None if it can): the store cannot hold a lineage, or the run
    is one of another problem or settings (claim_run, which records the identity otherwise). `ksci evolve` asks this
    before Prefect starts (ksci/cli.py); a deployment's flow run, which no command line checked, asks it first."""
    from ksci.lineage.storage import check_store_root

    return check_store_root(store_root, write=True) or claim_run(LineageStore(store_root), run, identity)
