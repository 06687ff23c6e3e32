"""How every output of a run words its numbers: one convention for gains, and the mark on a simulated run's numbers.

Shared by the end-of-run summary (summary.py), `ksci status` (status.py) and the HTML report, which must agree:
a user who reads "1.05x faster" in one place and "5.0% faster" or "-61.2% on its parent" in another has to stop
and convert. No pandas here, so that the summary printed by `ksci evolve` loads nothing heavy.

A simulated run (`ksci evolve --simulate`) has timings that the GPU simulator made up or replayed from a recording
of another run; nothing in it was measured, and every line, tile, table and plot that shows one of its times or
ratios says "simulated". A run is known to be simulated from its rows: the simulator names itself as the GPU of
its verdicts and as the toolchain of its compiles (ksci/backends/simulated.py), so rows of failed compiles are
recognised too.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

from ksci.backends.simulated import is_simulated

SIMULATED = "simulated"
SIMULATED_NOTE = (
    "simulated run: its times and ratios were made up by the GPU simulator (or replayed from a recording), not measured"
)


def any_simulated(rows: Iterable[Mapping]) -> bool:
    """A run is simulated if any of its rows is: the simulator never shares a run with a real GPU."""
    return any(is_simulated(row) for row in rows)


def gain(ratio: float | None) -> str:
    """A speed ratio (old time / new time) in the one convention: "1.05x faster", or "1.70x slower" below 1."""
    if ratio is None or not isinstance(ratio, numbers.Real) or math.isnan(ratio) or ratio <= 0:
        return "n/a"
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def marked(text: str, simulated: bool) -> str:
    """`text` followed by "(simulated)" in a simulated run, as it is otherwise."""
    return f"{text} ({SIMULATED})" if simulated else text
