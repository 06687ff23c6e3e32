"""problem.yaml's schema: what each key may hold, checked by pydantic before a Problem is built, and its complaints
turned into one line naming the file, the key and what is wrong (`tolerance.rtol: 'abc' is not a number`).

Why a schema and not the loader's own lookups: a missing key used to end in a KeyError traceback, a wrong type
somewhere downstream (`rtol: abc` in the harness, `{m: -5, n: "abc"}` in the compiled kernel's arguments), and a
misspelt key (`tolerence:`) was silently ignored. Unknown keys are refused where the format is ours (top level,
entry point, tolerances, roofline, templates); `imported:` is the importer's own record and is not checked here.

Limits: a problem.yaml is read whole by every command that names the problem, so its size is bounded before it is
parsed (MAX_SPEC_BYTES) and each shape list is bounded too (MAX_SHAPES): every test shape is verified and every
benchmark shape timed for each candidate, so thousands of shapes are a mistake, not a suite. 10^5 shapes took
58 s to parse with PyYAML's pure-Python loader; such a file is now refused in milliseconds.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints, ValidationError, model_validator

MAX_SPEC_BYTES = 512 * 1024
MAX_SHAPES = 1000  # per list: tests, benchmarks

Target = Literal["cuda", "rocm"]
Dialect = Literal["cuda", "hip"]
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Text = Annotated[str, StringConstraints(min_length=1)]
Bound = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # a tolerance: finite, not negative
Dimension = Annotated[StrictInt, Field(ge=0)]  # YAML's ints only: no "abc", no 1.5, no true
Shape = dict[Identifier, Dimension]
ParamValue = StrictInt | float | str


class _Closed(BaseModel):
    """A part of the format whose keys are all ours: an unknown key is a typo, refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EntryPoint(_Closed):
    name: Identifier
    signature: Text
    args: list[Identifier] = Field(min_length=1)
    outputs: list[Identifier] = Field(min_length=1)
    returns: str | None = None


class ToleranceSpec(_Closed):
    rtol: Bound
    atol: Bound


class ProfileTolerance(_Closed):
    rtol: Bound | None = None
    atol: Bound | None = None
    atol_rms: Bound | None = None
    acc_rtol: Bound | None = None


class ToleranceOverride(ProfileTolerance):
    profiles: dict[Text, ProfileTolerance] | None = None  # per input profile, over the target's own


class Roofline(_Closed):
    compute: Literal["fp8", "bf16", "fp32"]  # the compute units of ksci/problem/roofline.py's device table


class TemplateItem(_Closed):
    name: Identifier
    file: Text
    params: dict[Identifier, Annotated[list[ParamValue], Field(min_length=1)]] = Field(default_factory=dict)
    default: dict[Identifier, ParamValue] = Field(default_factory=dict)
    constraints: list[Text] = Field(default_factory=list)

    @model_validator(mode="after")
    def _file_inside_the_problem(self) -> TemplateItem:
        """`../../../../etc/passwd` would render a host file into a kernel (and into the LLM's prompt)."""
        normal = posixpath.normpath(self.file.replace("\\", "/"))
        if posixpath.isabs(normal) or normal == ".." or normal.startswith("../"):
            raise ValueError(f"file {self.file!r} is outside the problem folder (give a path inside it)")
        return self


class DimensionRange(_Closed):
    """One dimension's domain in `shape_contract`: min <= value <= max, a multiple of multiple_of."""

    min: Dimension
    max: Dimension
    multiple_of: Annotated[StrictInt, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _ordered(self) -> DimensionRange:
        if self.max < self.min:
            raise ValueError(f"max {self.max} is less than min {self.min}")
        if self.max // self.multiple_of * self.multiple_of < self.min:
            raise ValueError(f"no multiple of {self.multiple_of} lies between {self.min} and {self.max}")
        return self


class ProblemSpec(_Closed):
    name: Identifier
    description: Text
    entry_point: EntryPoint
    dtypes: dict[Target, dict[Identifier, Text]] = Field(min_length=1)
    layouts: dict[str, str] = Field(default_factory=dict)
    tolerance: ToleranceSpec
    tolerance_by_target: dict[Target, ToleranceOverride] | None = None
    trials: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    tests: list[Shape] = Field(min_length=1, max_length=MAX_SHAPES)
    benchmarks: list[Shape] = Field(min_length=1, max_length=MAX_SHAPES)
    ranking: Literal["geomean"] = "geomean"
    roofline: Roofline
    templates: dict[Dialect, list[TemplateItem] | None] | None = None
    published_speed_of_light: dict[str, dict[str, Annotated[float, Field(gt=0)]]] | None = None
    inputs: list[Text] | None = Field(default=None, min_length=1)  # input profiles (docs/evaluation.md)
    shape_contract: dict[Identifier, DimensionRange] | None = None  # ksci/problem/contract.py
    imported: dict[str, Any] | None = None  # the importer's record (ksci/importers/), read by its reference.py

    @model_validator(mode="after")
    def _shapes_fit_the_entry_point(self) -> ProblemSpec:
        for where, shapes in (("tests", self.tests), ("benchmarks", self.benchmarks)):
            for index, shape in enumerate(shapes):
                if "seed" not in shape:
                    raise ValueError(
                        f"{where}[{index}] has no seed (each shape needs one: its inputs are drawn from it)"
                    )
        missing = set(self.entry_point.outputs) - set(self.entry_point.args)
        if missing:
            raise ValueError(f"entry_point.outputs {sorted(missing)} are not among entry_point.args")
        every_shape = self.tests + self.benchmarks
        for arg in self.entry_point.args:
            tensor = all(arg in dtypes for dtypes in self.dtypes.values())
            if arg != "stream" and not tensor and not all(arg in shape for shape in every_shape):
                raise ValueError(
                    f"entry_point.args: {arg!r} is neither a tensor of every target's dtypes nor a key of every test "
                    "and benchmark shape"
                )
        return self

    @model_validator(mode="after")
    def _shapes_in_the_contract(self) -> ProblemSpec:
        """The contract names every dimension of the shapes (every key but seed), and every listed shape lies in it."""
        if self.shape_contract is None:
            return self
        dims = {key for shape in self.tests + self.benchmarks for key in shape if key != "seed"}
        if set(self.shape_contract) != dims:
            raise ValueError(
                f"shape_contract names {sorted(self.shape_contract)}, the shapes' dimensions are {sorted(dims)}"
            )
        for where, shapes in (("tests", self.tests), ("benchmarks", self.benchmarks)):
            for index, shape in enumerate(shapes):
                for key, rule in self.shape_contract.items():
                    value = shape.get(key, rule.min)
                    if not rule.min <= value <= rule.max or value % rule.multiple_of:
                        raise ValueError(
                            f"{where}[{index}].{key} = {value} is outside shape_contract.{key} "
                            f"({rule.min}..{rule.max}, a multiple of {rule.multiple_of})"
                        )
        return self


def check_spec(spec: object, source: Path | str) -> ProblemSpec:
    """The spec validated, or ValueError with one line: `SOURCE: KEY: what is wrong`."""
    if not isinstance(spec, dict):
        raise ValueError(
            f"{source}: expected a mapping of keys (name, description, entry_point, ...), not {_kind(spec)}"
        )
    try:
        return ProblemSpec.model_validate(spec)
    except ValidationError as exc:
        raise ValueError(f"{source}: {one_line(exc)}") from None


def one_line(exc: ValidationError) -> str:
    """pydantic's first complaint as `key.path: problem (value)`, and how many more there are."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = _key_path(first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown key{more}"
    if first["type"] == "missing":
        return f"{where}: missing{more}"
    message = first["msg"].removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    value = "" if first["type"].startswith("value_error") else f" (got {_shown(first['input'])})"
    return f"{where + ': ' if where else ''}{message}{value}{more}"


def _key_path(loc: tuple) -> str:
    """('tests', 3, 'n') -> 'tests[3].n'; pydantic's names of union branches and of the after-validators left out."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("int", "float", "str", "list[...]", "constrained-str") or "[" in str(part):
            continue
        else:
            text += f".{part}" if text else str(part)
    return text


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: object) -> str:
    return "nothing (an empty file)" if value is None else f"a {type(value).__name__}"
