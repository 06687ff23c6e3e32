"""Secrets kept out of everything the LLM stages write, and LLM text made safe to store.

An endpoint can echo what it was sent: the API key (a proxy's error page, a model asked to repeat its headers) or
the credentials of a base URL like http://user:password@host/v1. Every answer, model name, finish reason and error
text passes through one Scrubber in ksci.llm.client before anything else sees it, so that no Parquet row, kernel
source, finding, Prefect result, log line or report holds them. The same place normalises the text (a lone
surrogate cannot be encoded as UTF-8; a NUL byte cuts C strings and some viewers), so that what is stored can be.

The base URL's credentials are kept apart from the URL (ksci.llm.config): the URL that is shown, logged and passed
as a Prefect parameter has none, and the credentials travel as a pydantic SecretStr, which Prefect's parameter
encoder writes as "**********".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit, urlunsplit

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # a shorter "secret" would redact ordinary letters everywhere; none is that short in practice
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_UNSAFE_LABEL = re.compile(r"[^A-Za-z0-9._:/@+=-]")
LABEL_CHARS = 120


@dataclass(frozen=True)
class Scrubber:
    """Replaces each configured secret (and its percent-encoded form) with [redacted]."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, *values: str | None) -> Scrubber:
        found: set[str] = set()
        for value in values:
            if value and len(value) >= MIN_SECRET_CHARS:
                found |= {value, quote(value, safe=""), unquote(value)}
        # Longest first, so that a secret containing another is replaced whole.
        return cls(tuple(sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text


def normalise_text(text: str) -> str:
    """Text that can be stored: lone surrogates become U+FFFD, NUL bytes are dropped."""
    return _SURROGATE.sub("\ufffd", text).replace("\x00", "")


def safe_label(text: str, limit: int = LABEL_CHARS) -> str:
    """A name from the endpoint (a model name) as one short line of harmless characters, fit for a C comment."""
    return _UNSAFE_LABEL.sub("_", normalise_text(text))[:limit] or "unknown"


def split_credentials(url: str | None) -> tuple[str | None, str | None]:
    """(the URL without user:password@, the "user:password" part or None)."""
    if not url:
        return url, None
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=host)), userinfo


def join_credentials(url: str | None, userinfo: str | None) -> str | None:
    """The URL to connect to: `url` with its credentials put back."""
    if not url or not userinfo:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def credential_parts(userinfo: str | None) -> tuple[str, ...]:
    """What of a URL's user:password must never be written: the whole and the password alone."""
    if not userinfo:
        return ()
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    return tuple(p for p in (userinfo, password) if p)
