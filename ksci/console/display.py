"""The progress of `ksci evolve`: a live display in a terminal (rich), plain lines elsewhere, nothing with --quiet.

What a user sees first is the run's name and where its lineage and log file are; then the Prefect API's start-up
as a step; then a line per generation that fills as its candidates are recorded: verdicts by class, the best
geomean so far against the vendor library and the speed of light (where the problem knows them), and the LLM's
cost so far for an LLM run. A simulated run says "simulated" on every line that shows a number. When stdout is no
terminal (a pipe, a file, CI), one plain line per generation instead. The final summary is the CLI's
(ksci.report.summary.format_evolution), printed after the display has closed.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ksci.console.events import RunObserver
from ksci.report.summary import format_evolution
from ksci.report.wording import gain

LEDGER_EVERY_S = 5.0  # how often a live LLM run's cost is read again from its ledger


@dataclass(frozen=True)
class RunHeader:
    """What the display says about the run before it starts."""

    run: str
    problem: str
    target: str
    generations: int
    store_root: str
    log_path: str
    simulated: str | None = None  # None: real GPUs; "": made-up timings; else the recording replayed
    llm: bool = False

    def title(self) -> str:
        how = "" if self.simulated is None else f"; simulated: {self.simulation()}"
        count = f"{self.generations} generation{'s' if self.generations != 1 else ''}"
        return f"ksci evolve: run {self.run} ({self.problem} on {self.target}, {count}{how})"

    def generation(self, generation: int) -> str:
        """As the lineage and the summary number it (from 0), with how far the run is."""
        return f"generation {generation} ({generation + 1} of {self.generations})"

    def simulation(self) -> str:
        return f"timings replayed from {self.simulated}" if self.simulated else "made-up timings, no GPU"


@dataclass
class Tally:
    """What the display knows of the run so far: verdicts per generation, the best row, the LLM's cost."""

    header: RunHeader
    verdicts: dict[int, Counter] = field(default_factory=dict)
    best: dict | None = None
    usd: float | None = None
    ledger_read_at: float = 0.0

    def add(self, generation: int, row: dict | None) -> None:
        status = "failed stage" if row is None else str(row.get("status"))
        self.verdicts.setdefault(generation, Counter())[status] += 1
        if row and row.get("status") == "ok" and row.get("geomean_us"):
            if self.best is None or row["geomean_us"] < self.best["geomean_us"]:
                self.best = row

    def read_cost(self, force: bool = False) -> None:
        """The run's LLM spending from its ledger (an LLM run only), at most every LEDGER_EVERY_S."""
        if not self.header.llm or (not force and time.monotonic() - self.ledger_read_at < LEDGER_EVERY_S):
            return
        self.ledger_read_at = time.monotonic()
        try:
            from ksci.llm.ledger import LlmLedger

            self.usd = LlmLedger(self.header.store_root).spent(self.header.run)[1]
        except Exception:  # noqa: BLE001 - a display must not stop the run; the summary says the cost
            pass

    def describe(self, generation: int) -> str:
        """Verdicts by class, best so far against the vendor and the speed of light, cost; "simulated" marked."""
        counts = self.verdicts.get(generation, Counter())
        parts = [", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no candidate"]
        parts.append(self.best_so_far())
        if self.usd is not None:
            parts.append(f"LLM ${self.usd:.4f} so far")
        text = "; ".join(parts)
        return f"{text} (simulated)" if self.header.simulated is not None else text

    def best_so_far(self) -> str:
        best = self.best
        if best is None:
            return "nothing has passed yet"
        text = f"best so far {best['geomean_us']:.2f} us"
        if best.get("vendor_geomean_us"):
            text += f", {gain(best['vendor_geomean_us'] / best['geomean_us'])} than the vendor library"
        if best.get("speed_of_light_geomean_us"):
            text += f", {100 * best['speed_of_light_geomean_us'] / best['geomean_us']:.0f}% of the speed of light"
        return text


class PlainLines(RunObserver):
    """No terminal: the header, then one line per generation as it ends, flushed at once."""

    def __init__(self, header: RunHeader, stream=None) -> None:
        self.header, self.tally, self.stream = header, Tally(header), stream or sys.stdout
        self._lock = threading.RLock()
        self.on_output_closed: Callable[[], None] = _ignore  # the CLI stops the run (ksci.console.stop)

    def say(self, text: str) -> None:
        try:
            with self._lock:  # not print(): inside a flow with log_prints, Prefect turns print() into a log record
                self.stream.write(text + "\n")
                self.stream.flush()
        except BrokenPipeError:  # `ksci evolve | head -3`: the reader went away, as a shell's SIGPIPE would say
            _stdout_to_devnull()
            self.on_output_closed()

    def open(self) -> None:
        self.say(self.header.title())
        self.say(f"  lineage: {self.header.store_root}/{self.header.run}   log: {self.header.log_path}")

    def step(self, doing: str, done: str):
        """A block shown as a step: `doing` while it runs (a spinner in a terminal), then `done` with its time."""
        return _PlainStep(self, doing, done)

    def candidate_finished(self, generation: int, row: dict | None) -> None:
        with self._lock:
            self.tally.add(generation, row)

    def generation_finished(self, summary: dict) -> None:
        generation = summary["generation"]
        with self._lock:
            self.tally.read_cost(force=True)
            text = self.tally.describe(generation)
        self.say(f"{self.header.generation(generation)} done: {summary.get('candidates', 0)} candidates: {text}")
        if summary.get("note"):  # what the generation could not do (plans lost to an endpoint, a spent budget)
            self.say(f"  {summary['note']}")

    def stopped_early(self, message: str) -> None:
        self.say(message)

    def close(self) -> None:
        pass


def _ignore() -> None:
    pass


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that no later write or the interpreter's last flush fails again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _PlainStep:
    def __init__(self, lines: PlainLines, doing: str, done: str) -> None:
        self.lines, self.doing, self.done = lines, doing, done

    def __enter__(self):
        self.started = time.monotonic()
        return self

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is None:
            self.lines.say(f"{self.done} in {time.monotonic() - self.started:.1f} s")


class TerminalDisplay(PlainLines):
    """A terminal: a live area (rich) with a spinner for the start-up and a filling bar per running generation;
    each finished step or generation is printed above it as one lasting line."""

    def __init__(self, header: RunHeader, console: Console | None = None) -> None:
        self.console = console or Console(file=sys.stdout, highlight=False)
        super().__init__(header, self.console.file)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=True,
        )
        self.tasks: dict[int, int] = {}

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def open(self) -> None:
        self.console.print(f"[bold]{self.header.title()}[/bold]")
        self.say(f"  lineage  {self.header.store_root}/{self.header.run}")
        self.say(f"  log      {self.header.log_path}")
        self.progress.start()

    def step(self, doing: str, done: str):
        return _TerminalStep(self, doing, done)

    def generation_started(self, generation: int, children: int) -> None:
        with self._lock:
            self.tasks[generation] = self.progress.add_task(
                self.header.generation(generation), total=children, status=""
            )

    def candidate_finished(self, generation: int, row: dict | None) -> None:
        with self._lock:
            self.tally.add(generation, row)
            self.tally.read_cost()
            task = self.tasks.get(generation)
            if task is not None:
                self.progress.update(task, advance=1, status=self.tally.describe(generation))

    def generation_finished(self, summary: dict) -> None:
        with self._lock:
            task = self.tasks.pop(summary["generation"], None)
            if task is not None:
                self.progress.remove_task(task)
        super().generation_finished(summary)

    def close(self) -> None:
        self.progress.stop()


class _TerminalStep:
    def __init__(self, display: TerminalDisplay, doing: str, done: str) -> None:
        self.display, self.doing, self.done = display, doing, done

    def __enter__(self):
        self.started = time.monotonic()
        self.task = self.display.progress.add_task(self.doing, total=None, status="")
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self.display.progress.remove_task(self.task)
        if exc_type is None:
            self.display.say(f"✓ {self.done} in {time.monotonic() - self.started:.1f} s")


class Quiet(PlainLines):
    """--quiet: nothing until the final summary."""

    def say(self, text: str) -> None:
        pass


def display_for(header: RunHeader, quiet: bool, verbose: bool) -> PlainLines:
    """The display a run gets: Quiet with --quiet, plain lines with --verbose (its logs are on the terminal) or
    when stdout is no terminal, else the live terminal display."""
    if quiet:
        return Quiet(header)
    if verbose or not sys.stdout.isatty():
        return PlainLines(header)
    return TerminalDisplay(header)


def print_summary(summaries: list[dict], store_root: str, run: str, llm: bool, log_path: str = "") -> None:
    """The final summary (ksci.report.summary.format_evolution), for an LLM run what its calls cost, and the next
    steps (next_steps), with --quiet too."""
    print(format_evolution(summaries, store_root))
    if llm and summaries:
        from ksci.llm.ledger import LlmLedger

        tokens, usd = LlmLedger(store_root).spent(run)
        print(f"LLM calls of this run so far: {tokens} tokens, ${usd:.4f} (see {store_root}/{run}/llm_calls)")
    print("\n".join(next_steps(run, store_root, log_path)))


def next_steps(run: str, store_root: str, log_path: str) -> list[str]:
    """What to do with a finished run: its status, its report, its log file (--store where it is not the default)."""
    from ksci.run import DEFAULT_STORE

    store = "" if store_root == DEFAULT_STORE else f" --store {shlex.quote(store_root)}"
    lines = [
        "next steps:",
        f"  ksci status --run {run}{store}    its generations and best kernels",
        f"  ksci report --run {run}{store}    an HTML report of the run",
    ]
    return lines + ([f"  log: {log_path}"] if log_path else [])
