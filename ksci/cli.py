"""The `ksci` command line. Stable for scripts: --json prints one JSON object on stdout.

Exit codes: 0 the command ran and the kernel passed (or compiled, with --compile-only); 1 the kernel
failed (its verdict says how), or an evolution stopped on a failed generation (rerun it with --run); 2 bad
input; 3 the environment cannot do it (no compiler, no GPU); 130 `ksci evolve` stopped by Ctrl-C or SIGINT, 143 by
SIGTERM (ksci/console/stop.py). A reader that closes stdout early (`| head`) ends the command quietly with 0, or
with the command's own code where it had finished (_quiet_on_closed_pipe); `ksci evolve` then stops its run.

This module is the entry point and the evolve command, the only core code that imports flows; the commands that run
no flow (problems, evaluate, render, report, port, ...) live in ksci/commands.py.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from ksci import PROJECT_ROOT, __version__
from ksci.arguments import OneLineParser, parse
from ksci.commands import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_evaluation_commands,
    add_run_and_porting_commands,
    problem_and_target,
)
from ksci.errors import os_error_line
from ksci.evaluate.options import EnvironmentProblem
from ksci.evaluate.run.visibility import gpu_visible, visible_gpus
from ksci.evaluate.toolchain.toolchains import ToolchainMissing
from ksci.export.command import add_export_command
from ksci.lineage.storage import check_store_root
from ksci.problem.spec import DIALECT_OF_TARGET, ProblemError, load_problem
from ksci.proposers.registry import kind_of
from ksci.proposers.registry import names as proposer_names
from ksci.run import DEFAULT_STORE, OVERLAP_RULE, RunLimits, RunSpec, new_run_name, overlap_allowed


def main(argv: list[str] | None = None) -> int:
    args = parse(build_parser(), argv)
    code = EXIT_OK  # what a reader that closed the pipe before the command finished gets (_quiet_on_closed_pipe)
    try:
        code = _run_command(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen where it can be handled
    except BrokenPipeError:
        _quiet_on_closed_pipe()
    return code


def _run_command(args) -> int:
    try:
        return args.handler(args)
    except (UsageError, ProblemError) as exc:
        print(f"ksci: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ToolchainMissing, EnvironmentProblem) as exc:
        print(f"ksci: cannot run here: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT


def _quiet_on_closed_pipe() -> None:
    """The reader of stdout went away (`ksci problems --json | head -1`): end without a traceback, as Python's docs
    recommend (library/signal.html, "Note on SIGPIPE"): point stdout at /dev/null, so that the interpreter's last
    flush of what is still buffered cannot fail again. The exit code is 0, or the command's own where it had
    finished: the reader chose to stop, which is no failure of the command (under `set -o pipefail` a script's
    `ksci ... | head` goes on), and 1 would read as "the kernel failed" (the docs' recipe exits 1; a shell's
    SIGPIPE death is 141)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ksci", description="Kernel Scientist: evolve and evaluate GPU kernels.")
    parser.add_argument("--version", action="version", version=f"ksci {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_evaluation_commands(sub)
    _add_evolve_command(sub)
    add_run_and_porting_commands(sub)
    add_export_command(sub)  # ksci/export/: a run's kernel as an installable torch op
    return parser


def _add_evolve_command(sub) -> None:
    p = sub.add_parser("evolve", help="evolve a problem's kernels (Prefect flows; embedded server by default)")
    problem_and_target(p)
    p.add_argument("--generations", type=int, default=5, metavar="N", help="generations to run (default: %(default)s)")
    p.add_argument("--run", help="continue this run (default: a new run named after the problem and time)")
    p.add_argument(
        "--children", type=int, default=6, metavar="K", help="candidates per generation (default: %(default)s)"
    )
    p.add_argument(
        "--max-candidates",
        type=int,
        metavar="N",
        help="stop before a generation once the run holds N candidates (the one that reaches N gets only those "
        "left; default: no limit)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="MINUTES",
        help="start no generation after this many minutes (the one running finishes; continue with --run; "
        "default: no limit)",
    )
    p.add_argument(
        "--strategy", default="elitist", help="parent selection: elitist, tournament or diverse (default: %(default)s)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the proposers' random choices (parents, Optuna's sampler): the same seed proposes the same "
        "candidates, so a rerun replays from the cache (default: %(default)s)",
    )
    p.add_argument("--arch", help="GPU architecture to compile for (default: the GPU's own, else sm_90a / gfx942)")
    p.add_argument("--gpus", help="comma-separated GPU indices to spread candidates over (default: every visible GPU)")
    p.add_argument(
        "--overlap",
        type=int,
        help="generations a new one may overlap, so that GPUs wait less for a generation's compiles or its slowest "
        "candidate; it then learns from the generations before those, and generations 1..K seed the run beside "
        "generation 0 (tuning proposer only; default: 1 with it, else 0)",
    )
    p.add_argument(
        "--store", help="lineage store: a folder or an fsspec URL such as s3://bucket/runs (default: data/runs)"
    )
    _add_proposer_options(p)
    p.add_argument("--no-profile", action="store_true", help="do not profile each generation's Base (ncu/rocprofv3)")
    race = "stop timing a shape once a candidate is known (95%%) to be over 3%% slower there than the run's best: "
    race += "fewer calls, the same checks per call; --no-race times every shape to 0.5%% (default: %(default)s)"
    p.add_argument("--race", action=argparse.BooleanOptionalAction, default=True, help=race)
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="print only the final summary (default: progress)")
    shown.add_argument(
        "--verbose",
        action="store_true",
        help="print Prefect's logs on the terminal too (default: in RUN/evolve.log in the store, and the Prefect UI)",
    )
    p.set_defaults(handler=cmd_evolve)


def _add_proposer_options(p: argparse.ArgumentParser) -> None:
    """Who writes an evolution's children, the LLM's endpoint and budget, and the GPU simulator."""
    p.add_argument(
        "--proposer",
        choices=("auto", *proposer_names()),
        default="auto",
        help="who writes the children: the LLM scientist, Optuna tuning of the seed templates, or auto "
        "(llm when an endpoint is configured, else tuning) (default: %(default)s)",
    )
    p.add_argument("--llm-config", type=Path, help="LLM config file (TOML; default: $KSCI_LLM_CONFIG, ./ksci.toml)")
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (default: $KSCI_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="model for every LLM stage (default: $KSCI_LLM_MODEL)")
    p.add_argument(
        "--budget-tokens",
        type=int,
        help="stop the run cleanly once its LLM calls used this many tokens (default: no limit)",
    )
    p.add_argument(
        "--budget-usd",
        type=float,
        help="stop the run cleanly once its LLM calls cost this much, in US dollars (default: no limit)",
    )
    p.add_argument(
        "--simulate",
        metavar="RECORDING",
        nargs="?",
        const="",
        help="no GPU: replay timings recorded on a GPU (a JSON file; none: made-up timings). For tests "
        "(default: off, real GPUs)",
    )


def cmd_evolve(args) -> int:
    """The evolution with its progress on the terminal (ksci.console) and Prefect's logs in the run's log file.

    Stopping: Ctrl-C (the terminal's SIGINT to the whole process group), SIGINT or SIGTERM to this process end the
    run within seconds, with no process left behind and one line naming the run and how to continue it; rc 130
    for SIGINT, 143 for SIGTERM (ksci.console.stop). A second Ctrl-C ends it at once."""
    proposer, llm = _check_evolve(args)
    spec = _run_spec(args, proposer)
    from ksci.console.display import RunHeader, display_for, print_summary
    from ksci.console.events import install
    from ksci.console.logs import log_path_of, route_prefect_logs
    from ksci.console.stop import Interrupted, StopOnSignals, say_stopped
    from ksci.embedded import EmbeddedApi, configure_prefect

    log_path = log_path_of(spec.store_root, spec.run, PROJECT_ROOT / "data" / "logs")
    route_prefect_logs(log_path, args.verbose)
    configure_prefect()
    header = RunHeader(spec.run, spec.problem, spec.target, spec.generations, spec.store_root, str(log_path))
    header = replace(header, simulated=spec.simulate, llm=llm is not None)
    display = display_for(header, args.quiet, args.verbose)
    api = None if os.environ.get("PREFECT_API_URL") else EmbeddedApi(log_path)  # a server of the user's wins
    stop = StopOnSignals(lambda why: say_stopped(spec.run, why), api.kill if api else lambda: None)
    with stop:
        display.on_output_closed = lambda: stop.stop(Interrupted("stopped: its output was closed", EXIT_OK))
        try:
            display.open()
            install(display)
            summaries = _evolve(spec, llm, display, api)
        except (Interrupted, KeyboardInterrupt, _termination_signal()) as exc:
            display.close()
            stop.say_once(getattr(exc, "why", "stopped by a signal"))
            return getattr(exc, "exit_code", 128 + getattr(exc, "signal", signal.SIGINT))
        except (UsageError, ProblemError, ToolchainMissing, EnvironmentProblem):
            raise  # main() says these in one line, with their own exit codes
        except OSError as exc:  # writing the store (a full disk): one line naming the path and the error
            display.close()
            print(f"ksci: evolution {spec.run} stopped: {os_error_line(exc)}; every candidate recorded so far is kept: "
                  f"rerun with --run {spec.run} to continue (log: {log_path})", file=sys.stderr)  # fmt: skip
            return EXIT_FAILED
        except Exception as exc:  # a generation failed; Prefect has logged its traceback, so one line is enough here
            display.close()
            print(f"ksci: evolution {spec.run} stopped: {_stopped_because(exc)} (log: {log_path})", file=sys.stderr)
            print(
                f"ksci: every candidate recorded so far is kept; rerun with --run {spec.run} to continue",
                file=sys.stderr,
            )
            return EXIT_FAILED
        finally:
            display.close()
            install(None)
    print_summary(summaries, spec.store_root, spec.run, llm is not None, str(log_path))
    return EXIT_OK


def _evolve(spec: RunSpec, llm, display, api) -> list[dict]:
    """Start the embedded API (a step of the display) while importing Prefect, then run the evolve flow. The API is
    stopped at exit, after Prefect's own exit handlers have sent their last logs and events (atexit runs in reverse
    order, and it is registered before Prefect is imported)."""
    if api is not None:
        with display.step("starting the Prefect API (embedded server)", "Prefect API (embedded server) started"):
            atexit.register(api.stop)
            api.start()
            from flows.evolve import evolve

            api.wait_ready()
    from flows.evolve import evolve

    return evolve(**spec.parameters(), llm=llm)


def _termination_signal() -> type[BaseException]:
    """Prefect's exception for a SIGTERM during a flow run, which normally hands the signal on to ksci's handler
    (ksci.console.stop) but may end the flow run itself; evaluated only once an exception is raised, when Prefect has
    been imported."""
    from prefect.exceptions import TerminationSignal

    return TerminationSignal


def _check_evolve(args):
    """Refuse what cannot run before Prefect starts, each in one line (rc 2): the problem and its templates, the
    run's settings and limits, the LLM budget, the store, the --simulate recording, and a --run whose lineage is
    another run's (ksci.lineage.identity). Records the run's identity; returns the proposer and its LLM
    configuration (_proposer)."""
    problem = load_problem(args.problem)
    _check_settings(args)
    store_problem = check_store_root(args.store or DEFAULT_STORE, write=True)  # read-only, a file, memory://, ...
    if store_problem:
        raise UsageError(store_problem)
    if args.simulate:
        from ksci.backends.simulated import RecordingError, load_recording

        try:
            load_recording(args.simulate, problem)
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    if args.simulate is None and not gpu_visible(args.target):
        via_make = os.environ.get("KSCI_VIA_MAKE") == "1"  # `make evolve` sets it: its own words for the option
        made_up, replay = ("SIMULATE=1", "SIMULATE=FILE") if via_make else ("--simulate", "--simulate FILE")
        raise EnvironmentProblem(
            f"no {args.target} GPU is visible on this machine, so no kernel can be verified or timed "
            f"({made_up}, for trying the loop out, makes timings up; {replay} replays timings recorded in FILE)"
        )
    from ksci.problem.render import check_template

    for template in problem.templates_for(DIALECT_OF_TARGET[args.target]):
        check_template(template)  # a Jinja syntax error: one line here, not a traceback in every render task
    proposer, llm = _proposer(args)
    if kind_of(proposer).needs_templates:
        from ksci.proposers.space import needs_template

        missing = needs_template(problem, DIALECT_OF_TARGET[args.target])
        if missing:
            raise UsageError(missing)
    if args.overlap is not None and not overlap_allowed(args.overlap, proposer):
        raise UsageError(f"--overlap must be {OVERLAP_RULE}")
    _claim_run(args, proposer)
    return proposer, llm


def _check_settings(args) -> None:
    """The command's own values (ksci.run's checks): run name, strategy, counts, seed, limits, budgets."""
    from ksci.run import budget_problem, counts_problem, limits_problem, run_name_problem, strategy_problem

    wrong = (
        (run_name_problem(args.run) if args.run is not None else None)
        or strategy_problem(args.strategy)
        or counts_problem(args.generations, args.children, args.seed)
        or limits_problem(args.max_candidates, args.time_limit)
        or budget_problem(args.budget_tokens, args.budget_usd)
    )
    if wrong:
        raise UsageError(wrong)


def _claim_run(args, proposer: str) -> None:
    """Name the run (one name for the check and the run: args.run), then refuse a --run holding another run's
    candidates (other problem, target, settings or templates) and record this run's identity for the next one."""
    from ksci.lineage.identity import claim_run
    from ksci.lineage.store import LineageStore

    args.run = args.run or new_run_name(args.problem, args.target)
    try:
        spec = _run_spec(args, proposer)
        refusal = claim_run(LineageStore(spec.store_root), spec.run, spec.identity())
    except ValueError as exc:  # a RunSpec refusing its values, or a run's identity file that does not read
        raise UsageError(str(exc)) from None
    if refusal:
        raise UsageError(refusal)
    store = LineageStore(spec.store_root)  # a continued run's damaged parts, named as `ksci status` names them
    for warning in store.read_lineage(spec.run).warnings() if spec.run in store.runs() else []:
        print(f"ksci: warning: {warning}", file=sys.stderr)


def _run_spec(args, proposer: str) -> RunSpec:
    """The run's settings from the command line: one RunSpec, which the evolve flow runs."""
    gpus = _gpus(args)
    overlap = args.overlap if args.overlap is not None else kind_of(proposer).default_overlap
    return RunSpec(
        problem=args.problem,
        target=args.target,
        run=args.run or new_run_name(args.problem, args.target),
        generations=args.generations,
        children=args.children,
        strategy=args.strategy,
        seed=args.seed,
        store_root=str(args.store or DEFAULT_STORE),
        arch=args.arch,
        gpus=tuple(gpus),
        simulate=args.simulate,
        proposer=proposer,
        overlap=overlap,
        profile=not args.no_profile,
        race=args.race,
        limits=RunLimits(args.max_candidates, None if args.time_limit is None else 60.0 * args.time_limit),
    )


def _stopped_because(exc: Exception) -> str:
    import httpx

    why = f"{type(exc).__name__}: {exc}"
    api = os.environ.get("PREFECT_API_URL")
    if api and isinstance(exc, httpx.TransportError):  # raised by Prefect's client once its retries are spent
        return f"the Prefect API at {api} did not answer ({why})"
    return why


def _proposer(args):
    """("tuning", None) or ("llm", its configuration); auto picks llm when an endpoint is configured."""
    from ksci.llm.config import LlmConfigError, load_config

    if args.proposer != "auto" and not kind_of(args.proposer).uses_llm:
        return args.proposer, None
    try:
        llm = load_config(
            args.llm_config,
            base_url=args.llm_base_url,
            model=args.llm_model,
            budget_tokens=args.budget_tokens,
            budget_usd=args.budget_usd,
        )
        if not llm.configured:
            if args.proposer != "auto":
                raise UsageError(
                    f"--proposer {args.proposer} needs an endpoint: set KSCI_LLM_BASE_URL (or OPENAI_BASE_URL), or "
                    "KSCI_LLM_API_KEY / OPENAI_API_KEY for OpenAI, or --llm-base-url, or base_url in ksci.toml"
                )
            return "tuning", None
        llm.require_models()
    except LlmConfigError as exc:
        if args.proposer == "auto" and not args.llm_config:
            # An OPENAI_API_KEY set for something else must not turn a plain `ksci evolve` into an error.
            print(f"ksci: not using the LLM ({exc}); using the tuning proposer", file=sys.stderr)
            return "tuning", None
        raise UsageError(str(exc)) from None
    return ("llm" if args.proposer == "auto" else args.proposer), llm


def _gpus(args) -> list[str]:
    if args.gpus:
        gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
        if not all(g.isdigit() for g in gpus):
            raise UsageError(f"--gpus {args.gpus!r}: expected GPU indices such as 0,1")
        return gpus
    return ["0"] if args.simulate is not None else visible_gpus(args.target)


if __name__ == "__main__":
    sys.exit(main())
