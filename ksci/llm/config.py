"""LLM configuration: endpoint, model per stage, sampling, prices, budgets. From a TOML file and the environment.

Precedence: command-line options > environment variables > config file > defaults. The API key itself is never
stored in any object here: only the *name* of the environment variable that holds it (`api_key_env`), which the
client reads at call time. A base URL's credentials (http://user:password@host/v1) are split off at once: `base_url`
holds the URL without them, `url_credentials` holds them as a pydantic SecretStr, which Prefect's parameter encoder
(and repr) write as "**********". So nothing this module builds can leak either into Parquet, logs or Prefect state.

Environment: KSCI_LLM_BASE_URL (else OPENAI_BASE_URL), KSCI_LLM_API_KEY (else OPENAI_API_KEY), KSCI_LLM_MODEL,
KSCI_LLM_CONFIG (path of the TOML file; default ./ksci.toml when it exists), KSCI_PROMPTS_DIR.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import SecretStr

from ksci.llm.secrets import split_credentials

STAGES = ("selector", "designer", "writer", "findings")
_STAGE_KEYS = {"model", "temperature", "max_tokens"}
_TOP_KEYS = {
    "base_url",
    "api_key_env",
    "model",
    "temperature",
    "max_tokens",
    "timeout_s",
    "retries",
    "retry_delay_s",
    "retry_after_cap_s",
    "repairs",
    "budget_tokens",
    "budget_usd",
    "prompts_dir",
    "structured_output",
    "stages",
    "prices",
}
DEFAULT_CONFIG_FILE = "ksci.toml"
NO_KEY = "not-needed"  # local servers (vLLM, Ollama) take any key; the SDK insists on one


class LlmConfigError(ValueError):
    """A config file or environment that cannot describe an endpoint: reported as a usage error."""


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    prompt: float
    completion: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


@dataclass(frozen=True)
class StageSettings:
    """Everything one stage's call depends on; a Prefect task input, so it is part of the cache key (no secret)."""

    stage: str
    base_url: str | None  # without credentials
    api_key_env: str | None
    model: str
    temperature: float
    max_tokens: int
    timeout_s: float  # the whole call's wall-clock deadline, not a per-read timeout
    structured_output: bool
    url_credentials: SecretStr | None = None  # the base URL's user:password, never written out
    retry_after_cap_s: float = 60.0  # the longest a 429's Retry-After is waited for before asking again


@dataclass(frozen=True)
class Budget:
    tokens: int | None = None
    usd: float | None = None

    def exceeded(self, tokens: int, usd: float, reserved_tokens: int = 0, reserved_usd: float = 0.0) -> str | None:
        """Why the budget is spent, or None while there is some left; `reserved_*`: what calls in flight may still
        spend (ksci.llm.budget), counted against the budget and named apart from what was spent."""
        if self.tokens is not None and tokens + reserved_tokens >= self.tokens:
            if not reserved_tokens:
                return f"token budget spent: {tokens} of {self.tokens} tokens"
            return (f"token budget spent or reserved: {tokens} tokens spent and {reserved_tokens} reserved by calls "
                    f"in flight, of {self.tokens}")  # fmt: skip
        if self.usd is not None and usd + reserved_usd >= self.usd:
            if not reserved_usd:
                return f"money budget spent: ${usd:.4f} of ${self.usd:.4f}"
            return (f"money budget spent or reserved: ${usd:.4f} spent and ${reserved_usd:.4f} reserved by calls in "
                    f"flight, of ${self.usd:.4f}")  # fmt: skip
        return None


@dataclass(frozen=True)
class LlmConfig:
    base_url: str | None = None  # without credentials (_build splits them off into url_credentials)
    api_key_env: str | None = None
    url_credentials: SecretStr | None = None
    model: str | None = None
    stage_overrides: dict[str, dict] = field(default_factory=dict)
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout_s: float = 300.0
    retries: int = 3  # Prefect task retries on 429, 5xx, timeouts and connection errors
    retry_delay_s: float = 5.0  # first backoff delay; it doubles on each retry
    retry_after_cap_s: float = 60.0  # a 429's Retry-After is waited for, up to this long, before asking again
    repairs: int = 1  # writer repair attempts after a compile error, a wrong answer or an unusable answer
    budget: Budget = field(default_factory=Budget)
    prompts_dir: str | None = None
    structured_output: bool = True  # ask for response_format json_schema (falls back when the endpoint refuses)
    prices: dict[str, Price] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        """An endpoint is configured: a base URL, or a key for OpenAI's default one."""
        return bool(self.base_url or (self.api_key_env and os.environ.get(self.api_key_env)))

    def require_models(self) -> None:
        """Raise LlmConfigError unless every stage has a model (so a run fails before it starts, not midway)."""
        for stage in STAGES:
            self.stage(stage)

    def stage(self, stage: str) -> StageSettings:
        if stage not in STAGES:
            raise LlmConfigError(f"unknown LLM stage {stage!r} (known: {', '.join(STAGES)})")
        over = self.stage_overrides.get(stage, {})
        model = over.get("model", self.model)
        if not model:
            raise LlmConfigError("no model configured: set KSCI_LLM_MODEL, --llm-model or `model` in ksci.toml")
        return StageSettings(
            stage=stage,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            model=model,
            temperature=float(over.get("temperature", self.temperature)),
            max_tokens=int(over.get("max_tokens", self.max_tokens)),
            timeout_s=self.timeout_s,
            structured_output=self.structured_output,
            url_credentials=self.url_credentials,
            retry_after_cap_s=self.retry_after_cap_s,
        )

    def price(self, model: str) -> Price | None:
        return self.prices.get(model)


def load_config(path: str | Path | None = None, env: dict[str, str] | None = None, **overrides: object) -> LlmConfig:
    """The configuration from `path` (else KSCI_LLM_CONFIG, else ./ksci.toml if present), the environment, and
    `overrides` (command-line values; None means not given)."""
    env = os.environ if env is None else env
    path = path or env.get("KSCI_LLM_CONFIG")
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        path = DEFAULT_CONFIG_FILE
    values = _read_file(Path(path)) if path else {}
    from_env = {
        "base_url": env.get("KSCI_LLM_BASE_URL") or env.get("OPENAI_BASE_URL"),
        "model": env.get("KSCI_LLM_MODEL"),
        "prompts_dir": env.get("KSCI_PROMPTS_DIR"),
    }
    values.update({k: v for k, v in from_env.items() if v})
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "api_key_env" not in values:
        values["api_key_env"] = next((n for n in ("KSCI_LLM_API_KEY", "OPENAI_API_KEY") if env.get(n)), None)
    return _build(values, str(path) if path else "the environment")


def _read_file(path: Path) -> dict:
    if not path.is_file():
        raise LlmConfigError(f"LLM config file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise LlmConfigError(f"{path}: not valid TOML ({exc})") from exc
    section = data.get("llm", data)
    if not isinstance(section, dict):
        raise LlmConfigError(f"{path}: [llm] must be a table")
    if "api_key" in section:
        raise LlmConfigError(f"{path}: do not put the API key in a file; name its variable with api_key_env")
    unknown = sorted(set(section) - _TOP_KEYS)
    if unknown:
        raise LlmConfigError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_TOP_KEYS))})")
    return dict(section)


def _build(values: dict, origin: str) -> LlmConfig:
    try:
        stages = values.pop("stages", {}) or {}
        for stage, over in stages.items():
            if stage not in STAGES or not isinstance(over, dict) or set(over) - _STAGE_KEYS:
                raise LlmConfigError(f"{origin}: [llm.stages.{stage}] takes {', '.join(sorted(_STAGE_KEYS))}")
        prices = {
            m: Price(float(p["prompt"]), float(p["completion"])) for m, p in (values.pop("prices", {}) or {}).items()
        }
        budget = Budget(
            tokens=_optional(int, values.pop("budget_tokens", None)),
            usd=_optional(float, values.pop("budget_usd", None)),
        )
        base_url, userinfo = split_credentials(values.get("base_url"))
        values["base_url"] = base_url
        values["url_credentials"] = SecretStr(userinfo) if userinfo else None
        config = LlmConfig(stage_overrides=stages, prices=prices, budget=budget, **values)
        config = replace(
            config,
            temperature=float(config.temperature),
            max_tokens=int(config.max_tokens),
            timeout_s=float(config.timeout_s),
            retries=int(config.retries),
            retry_delay_s=float(config.retry_delay_s),
            retry_after_cap_s=float(config.retry_after_cap_s),
            repairs=int(config.repairs),
        )
    except (TypeError, KeyError, ValueError) as exc:
        if isinstance(exc, LlmConfigError):
            raise
        raise LlmConfigError(f"{origin}: bad LLM setting ({exc})") from exc
    if config.retries < 0 or config.repairs < 0 or config.max_tokens < 1 or not 0 < config.timeout_s < math.inf:
        raise LlmConfigError(f"{origin}: retries and repairs must be >= 0, max_tokens >= 1, timeout_s > 0")
    if not 0 <= config.retry_after_cap_s < math.inf:
        raise LlmConfigError(f"{origin}: retry_after_cap_s must be a number of seconds >= 0")
    return config


def _optional(kind, value):
    return None if value is None else kind(value)


def api_key(settings: StageSettings) -> str:
    """The key, read from the environment at call time (never stored)."""
    key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    return key or NO_KEY


def configured_llm(path: str | None) -> LlmConfig:
    """The LLM configuration of this machine (a worker's, for a deployed run), or a clear error before anything
    runs: the TOML file `path`, else KSCI_LLM_CONFIG or ./ksci.toml, and the KSCI_LLM_* / OPENAI_* variables."""
    llm = load_config(path)
    if not llm.configured:
        raise LlmConfigError(
            "the llm proposer needs an endpoint on this worker: set KSCI_LLM_BASE_URL (or OPENAI_BASE_URL) or "
            "KSCI_LLM_API_KEY / OPENAI_API_KEY in the worker's environment, or pass llm_config (a ksci.toml path)"
        )
    llm.require_models()
    return llm
