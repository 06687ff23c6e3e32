"""The `ksci` command line. Stable for scripts: --json prints one JSON object on stdout.

Exit codes: 0 the command ran and the kernel passed (or compiled, with --compile-only); 1 the kernel
failed (its verdict says how), or an evolution stopped on a failed generation (rerun it with --run); 2 bad
input; 3 the environment cannot do it (no compiler, no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from ksci.evaluate.hipify import find_hipify, hipify_source
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.pipeline import evaluate_source
from ksci.evaluate.results import Status
from ksci.evaluate.stages import measure_baselines
from ksci.evaluate.toolchain import ToolchainMissing
from ksci.evaluate.visibility import gpu_visible, visible_gpus
from ksci.problem.render import render_kernel
from ksci.problem.spec import (
    DIALECT_OF_TARGET,
    TARGETS,
    ProblemError,
    has_entry_point,
    list_problems,
    load_problem,
    register_problem_dir,
)
from ksci.report.summary import format_evolution, format_verdict
from ksci.run import DEFAULT_STORE, OVERLAP_RULE, RunLimits, RunSpec, new_run_name, overlap_allowed

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT = 0, 1, 2, 3


class UsageError(ValueError):
    """Bad input from the user: reported as one line, exit code 2."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (UsageError, ProblemError) as exc:
        print(f"ksci: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ToolchainMissing, EnvironmentProblem) as exc:
        print(f"ksci: cannot run here: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ksci", description="Kernel Scientist: evolve and evaluate GPU kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_evaluation_commands(sub)
    _add_evolve_command(sub)
    _add_run_and_porting_commands(sub)
    return parser


def _add_evaluation_commands(sub) -> None:
    """problems, evaluate, baseline, render: one kernel or problem, no flow."""
    p = sub.add_parser("problems", help="list the shipped problems")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_problems)

    p = sub.add_parser("evaluate", help="compile, verify and time one kernel source")
    _problem_and_target(p)
    p.add_argument("--source", required=True, type=Path, help="kernel source (.cu for CUDA, .hip for HIP)")
    p.add_argument("--arch", help="GPU architecture (default: the GPU's own, else sm_90a / gfx942)")
    p.add_argument("--compile-only", action="store_true", help="compile and report resources; do not run")
    p.add_argument("--verify-only", action="store_true", help="check correctness; do not time")
    p.add_argument("--no-baselines", action="store_true", help="do not time the reference and vendor library")
    p.add_argument("--timeout", type=float, default=900.0, help="hard timeout of the harness process, seconds")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    p.set_defaults(handler=cmd_evaluate)

    p = sub.add_parser("baseline", help="time the problem's reference and vendor library on this GPU")
    _problem_and_target(p)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_baseline)

    p = sub.add_parser("render", help="print a seed template rendered at a parameter point")
    _problem_and_target(p)
    p.add_argument("--template", required=True)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-o", "--output", type=Path)
    p.set_defaults(handler=cmd_render)


def _add_evolve_command(sub) -> None:
    p = sub.add_parser("evolve", help="evolve a problem's kernels (Prefect flows; embedded server by default)")
    _problem_and_target(p)
    p.add_argument("--generations", type=int, default=5)
    p.add_argument("--run", help="continue this run (default: a new run named after the problem and time)")
    p.add_argument("--children", type=int, default=6, help="candidates per generation")
    p.add_argument(
        "--max-candidates",
        type=int,
        metavar="N",
        help="stop before a generation once the run holds N candidates (the one that reaches N gets only those left)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="MINUTES",
        help="start no generation after this many minutes (the one running finishes; continue with --run)",
    )
    p.add_argument("--strategy", default="elitist", help="parent selection: elitist, tournament or diverse")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arch")
    p.add_argument("--gpus", help="comma-separated GPU indices to spread candidates over (default: every visible GPU)")
    p.add_argument(
        "--overlap",
        type=int,
        help="generations a new one may overlap, so that GPUs wait less for a generation's compiles or its slowest "
        "candidate; it then learns from the generations before those, and generations 1..K seed the run beside "
        "generation 0 (tuning proposer only; default: 1 on several GPUs, else 0)",
    )
    p.add_argument(
        "--store", help="lineage store: a folder or an fsspec URL such as s3://bucket/runs (default: data/runs)"
    )
    _add_proposer_options(p)
    p.set_defaults(handler=cmd_evolve)


def _add_proposer_options(p: argparse.ArgumentParser) -> None:
    """Who writes an evolution's children, the LLM's endpoint and budget, and the GPU simulator."""
    p.add_argument(
        "--proposer",
        choices=("auto", "tuning", "llm"),
        default="auto",
        help="who writes the children: the LLM scientist, Optuna tuning of the seed templates, or auto "
        "(llm when an endpoint is configured, else tuning)",
    )
    p.add_argument("--llm-config", type=Path, help="LLM config file (TOML; default: $KSCI_LLM_CONFIG, ./ksci.toml)")
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (default: $KSCI_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="model for every LLM stage (default: $KSCI_LLM_MODEL)")
    p.add_argument("--budget-tokens", type=int, help="stop the run cleanly once its LLM calls used this many tokens")
    p.add_argument("--budget-usd", type=float, help="stop the run cleanly once its LLM calls cost this much")
    p.add_argument(
        "--simulate",
        metavar="RECORDING",
        nargs="?",
        const="",
        help="no GPU: replay timings recorded on a GPU (a JSON file; none: made-up timings). For tests.",
    )


def _add_run_and_porting_commands(sub) -> None:
    """report, status: a run's lineage; import, port: problems and kernels from elsewhere."""
    p = sub.add_parser("report", help="write a run's evolution report: one self-contained HTML file")
    _run_and_store(p)
    p.add_argument("-o", "--output", type=Path, help="HTML file to write (default: RUN-report.html here)")
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser("status", help="a run's progress: generations, statuses, best so far, the best kernel")
    _run_and_store(p)
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("import", help="write a problem folder from a KernelBench file or a gpu-mode task")
    p.add_argument("format", choices=("kernelbench", "gpumode"))
    p.add_argument(
        "source", type=Path, help="KernelBench: FILE.py; gpu-mode: the task's folder (task.yml, reference.py)"
    )
    p.add_argument("--name", help="the problem's name (default: the file's or folder's name)")
    p.add_argument("--dest", type=Path, help="folder to write it to (default: kernels/); every command then finds it")
    p.add_argument("--force", action="store_true", help="replace a problem of that name in --dest")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("port", help="convert a CUDA kernel to HIP (hipify-clang, else hipify-perl, else torch's)")
    p.add_argument("file", type=Path)
    p.add_argument("-o", "--output", type=Path, help="where to write the HIP source (default: FILE.hip)")
    p.set_defaults(handler=cmd_port)


def _problem_and_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", required=True)
    p.add_argument("--target", choices=TARGETS, default="cuda")


def _run_and_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="the run's name (a folder of the store)")
    p.add_argument("--store", help="lineage store: a folder or an fsspec URL (default: data/runs)")


def cmd_problems(args) -> int:
    problems = [load_problem(name) for name in list_problems()]
    if args.json:
        rows = [
            {
                "name": p.name,
                "entry_point": p.entry_signature,
                "tests": len(p.tests),
                "benchmarks": len(p.benchmarks),
                "templates": {d: [t.name for t in p.templates_for(d)] for d in ("cuda", "hip")},
            }
            for p in problems
        ]
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    for p in problems:
        first_line = p.description.strip().splitlines()[0]
        print(f"{p.name:12s} {len(p.tests):3d} tests {len(p.benchmarks):3d} benchmarks  {first_line}")
    return EXIT_OK


def cmd_evaluate(args) -> int:
    problem = load_problem(args.problem)
    source = _read_source(args.source)
    if not has_entry_point(source, problem.entry_name):
        raise UsageError(f'{args.source} does not define the entry point extern "C" {problem.entry_name}(...)')
    phases = ("verify",) if args.verify_only else ("verify", "benchmark")
    options = EvaluationOptions(
        target=args.target,
        arch=args.arch,
        compile_only=args.compile_only,
        phases=phases,
        time_baselines=not args.no_baselines,
        timeout_s=args.timeout,
    )
    verdict = evaluate_source(problem, source, options)
    print(json.dumps(verdict.to_dict(), indent=1) if args.json else format_verdict(verdict))
    return EXIT_OK if verdict.status in (Status.OK, Status.COMPILED) else EXIT_FAILED


def cmd_baseline(args) -> int:
    problem = load_problem(args.problem)
    verdict = measure_baselines(problem, EvaluationOptions(target=args.target, timeout_s=args.timeout))
    print(json.dumps(verdict.to_dict(), indent=1) if args.json else format_verdict(verdict))
    return EXIT_OK


def cmd_render(args) -> int:
    problem = load_problem(args.problem)
    template = problem.template(DIALECT_OF_TARGET[args.target], args.template)
    params = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--param {item!r}: expected NAME=VALUE")
        params[name] = _parse_value(value)
    source = render_kernel(template, params)
    if args.output:
        args.output.write_text(source)
    else:
        sys.stdout.write(source)
    return EXIT_OK


def _exit_on_sigterm() -> None:
    """SIGTERM (a scheduler stopping the job, `timeout`, a container's stop) ends `ksci evolve` as an exception
    does: Python unwinds and runs its exit handlers, so the embedded Prefect API is stopped with it. Prefect's own
    handler marks the flow run crashed during the run, then hands the signal on to this one. With Python's default
    action instead, the process died at once and left the embedded API's server process running."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def cmd_evolve(args) -> int:
    proposer, llm = _check_evolve(args)
    from ksci.embedded import configure_prefect

    configure_prefect()
    _exit_on_sigterm()
    from flows.evolve import evolve

    spec = _run_spec(args, proposer)
    try:
        summaries = evolve(**spec.parameters(), llm=llm)
    except (UsageError, ProblemError, ToolchainMissing, EnvironmentProblem):
        raise  # main() says these in one line, with their own exit codes
    except Exception as exc:  # a generation failed; Prefect has logged its traceback, so one line is enough here
        print(f"ksci: evolution {spec.run} stopped: {_stopped_because(exc)}", file=sys.stderr)
        print(
            f"ksci: every candidate recorded so far is kept; rerun with --run {spec.run} to continue", file=sys.stderr
        )
        return EXIT_FAILED
    print(format_evolution(summaries, spec.store_root))
    if llm is not None and summaries:
        from ksci.llm.ledger import LlmLedger

        tokens, usd = LlmLedger(spec.store_root).spent(spec.run)
        print(f"LLM calls of this run so far: {tokens} tokens, ${usd:.4f} (see {spec.store_root}/{spec.run}/llm_calls)")
    return EXIT_OK


def _check_evolve(args):
    """Refuse what cannot run before Prefect starts; the proposer and its LLM configuration (_proposer)."""
    load_problem(args.problem)
    if args.generations < 1 or args.children < 1:
        raise UsageError("--generations and --children must be at least 1")
    if args.max_candidates is not None and args.max_candidates < 1:
        raise UsageError("--max-candidates must be at least 1")
    if args.time_limit is not None and args.time_limit < 0:
        raise UsageError("--time-limit must be at least 0 minutes")
    if args.simulate is None and not gpu_visible(args.target):
        raise EnvironmentProblem(
            f"no {args.target} GPU is visible on this machine, so no kernel can be verified or timed "
            "(--simulate replays recorded timings, for trying the loop out)"
        )
    proposer, llm = _proposer(args)
    if proposer == "tuning":
        from ksci.proposers.tuning import needs_template

        missing = needs_template(load_problem(args.problem), DIALECT_OF_TARGET[args.target])
        if missing:
            raise UsageError(missing)
    if args.overlap is not None and not overlap_allowed(args.overlap, proposer):
        raise UsageError(f"--overlap must be {OVERLAP_RULE}")
    return proposer, llm


def _run_spec(args, proposer: str) -> RunSpec:
    """The run's settings from the command line: one RunSpec, which the evolve flow runs."""
    gpus = _gpus(args)
    overlap = args.overlap if args.overlap is not None else int(proposer == "tuning" and len(gpus) > 1)
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

    if args.proposer == "tuning":
        return "tuning", None
    try:
        llm = load_config(
            args.llm_config,
            base_url=args.llm_base_url,
            model=args.llm_model,
            budget_tokens=args.budget_tokens,
            budget_usd=args.budget_usd,
        )
        if not llm.configured:
            if args.proposer == "llm":
                raise UsageError(
                    "--proposer llm needs an endpoint: set KSCI_LLM_BASE_URL (or OPENAI_BASE_URL), or "
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
    return "llm", llm


def cmd_report(args) -> int:
    from ksci.report.html import build_report  # matplotlib loads for this command only

    store, frame = _read_run(args)
    output = args.output or Path(f"{args.run}-report.html")
    output.write_text(build_report(frame, store.read_source))
    print(f"wrote {output}")
    return EXIT_OK


def cmd_status(args) -> int:
    from ksci.report.status import format_status  # no matplotlib: the status prints from the facts alone

    _store, frame = _read_run(args)
    print(format_status(frame, args.run))
    return EXIT_OK


def _read_run(args):
    from ksci import PROJECT_ROOT
    from ksci.lineage.store import LineageStore

    store = LineageStore(args.store or PROJECT_ROOT / "data" / "runs")
    if args.run not in store.runs():
        known = ", ".join(store.runs()) or "none"
        raise UsageError(f"no run {args.run!r} in {store.root} (runs there: {known})")
    return store, store.read(args.run)


def _gpus(args) -> list[str]:
    if args.gpus:
        gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
        if not all(g.isdigit() for g in gpus):
            raise UsageError(f"--gpus {args.gpus!r}: expected GPU indices such as 0,1")
        return gpus
    return ["0"] if args.simulate is not None else visible_gpus(args.target)


def cmd_import(args) -> int:
    from ksci.importers.common import ImportFailure
    from ksci.importers.gpumode import import_gpumode
    from ksci.importers.kernelbench import import_kernelbench

    importer = import_kernelbench if args.format == "kernelbench" else import_gpumode
    result = importer(args.source, name=args.name, dest=args.dest, replace=args.force)
    if isinstance(result, ImportFailure):
        raise UsageError(f"cannot import {args.source}: {result}")
    if args.dest:
        register_problem_dir(args.dest)
    print(f"wrote {result.root} ({result.tests} test and {result.benchmarks} benchmark shapes)")
    for note in result.notes:
        print(f"  {note}")
    if result.name in list_problems():
        print(f"  ksci problems lists it as {result.name}; it has no seed template (docs/problem-format.md)")
    else:  # KSCI_KERNELS_DIR chooses the search path, and it leaves --dest out
        print(f"  add {result.root.parent} to KSCI_KERNELS_DIR to use it: that variable replaces the search path")
    return EXIT_OK


def cmd_port(args) -> int:
    source = _read_source(args.file)
    tools = find_hipify()
    if not tools:
        raise ToolchainMissing(
            "no CUDA-to-HIP converter: neither hipify-clang nor hipify-perl is on PATH (ROCm installs them in "
            "/opt/rocm/bin), and torch (torch.utils.hipify) is not installed"
        )
    result = hipify_source(source, tools)
    if not result.ok:
        print(f"ksci: cannot convert {args.file}:\n{result.log.strip()}", file=sys.stderr)
        return EXIT_FAILED
    output = args.output or args.file.with_suffix(".hip")
    output.write_text(result.source)
    print(f"wrote {output} (converted with {result.tool})")
    for name in result.unconverted:
        print(f"warning: left unconverted: {name}", file=sys.stderr)
    return EXIT_OK


def _read_source(path: Path) -> str:
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    try:
        return path.read_text()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a text file") from exc


def _parse_value(text: str):
    try:
        return int(text)
    except ValueError:
        return text


if __name__ == "__main__":
    sys.exit(main())
