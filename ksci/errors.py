"""The one way a failure travels through the core: a value with a kind, a message, and whether asking again may fix
it, so that it can be recorded, shown to the LLM, written into a note, and decided on by whoever holds it.

Exceptions stay only where Prefect must act on them: a task raises so that Prefect retries it (a transient failure)
or does not cache it (any failed call), and the caller turns the exception back into its Failure at once
(tasks/llm.py). Everything else (ksci.llm.client, ksci.llm.ask, the proposers) returns Failure values.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

BUDGET = "budget"  # the run's token or money budget is spent: no further calls
UNUSABLE = "unusable"  # an answer came but cannot be used (no code block, malformed JSON)
TRUNCATED = "truncated"  # an answer came but was cut at max_tokens


@dataclass(frozen=True)
class Failure:
    """What went wrong. `kind`: a short tag (budget, unusable, truncated, http_404, rate_limit, timeout, ...)."""

    kind: str
    message: str
    transient: bool = False  # the same request may succeed later (429, 5xx, timeouts, lost connections)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def os_error_line(exc: OSError) -> str:
    """An OSError on one line, naming its file: `PATH: No space left on device (ENOSPC)`."""
    name = errno.errorcode.get(exc.errno or 0, "")
    what = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{what}" + (f" ({name})" if name else "")
