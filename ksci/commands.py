"""The `ksci` commands that run no flow: problems, evaluate, baseline, render, report, status, runs, import and port,
each command's arguments beside its handler. ksci/cli.py is the entry point: it builds the parser from these and its own
evolve command (the one command that runs flows), and turns UsageError and the environment's errors into exit codes.

Kept out of ksci/problem/ and ksci/evaluate/ on purpose: those folders are in the verdicts' cache keys
(tasks/cache_keys.py hashes them whole), and a changed help text or printed line must not recompute any verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ksci.console.listing import aligned, problem_cells, problem_entry
from ksci.evaluate.host_stages import first_error, measure_baselines
from ksci.evaluate.options import DEFAULT_CACHE_DIR, EvaluationOptions
from ksci.evaluate.results import HipifyResult, Status
from ksci.evaluate.stage_order import evaluate_source
from ksci.evaluate.toolchain.compile import compile_source, name_source, with_source_name
from ksci.evaluate.toolchain.hipify import LEFT_CUDA_ONLY, REFUSED, find_hipify, hipify_source, looks_like_cuda
from ksci.evaluate.toolchain.toolchains import ToolchainMissing, default_arch, find_toolchain
from ksci.problem.contract import DEFAULT_COUNT, MAX_HELD_OUT
from ksci.problem.render import render_kernel
from ksci.problem.spec import (
    DIALECT_OF_TARGET,
    TARGETS,
    has_entry_point,
    list_problems,
    load_problem,
    register_problem_dir,
)
from ksci.profile.command import add_profile_arguments, print_profile
from ksci.report.summary import format_verdict

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT = 0, 1, 2, 3


class UsageError(ValueError):
    """Bad input from the user: reported as one line, exit code 2."""


def add_evaluation_commands(sub) -> None:
    """problems, evaluate, baseline, render: one kernel or problem, no flow."""
    p = sub.add_parser(
        "problems",
        help="list the problems: tests, benchmarks, flops, description; one whose problem.yaml does not load is "
        "listed as broken with its reason, and the exit code is then 1",
    )
    p.add_argument("--json", action="store_true", help="print them as a JSON list on stdout")
    p.set_defaults(handler=cmd_problems)

    p = sub.add_parser("evaluate", help="compile, verify and time one kernel source")
    problem_and_target(p)
    p.add_argument("--source", required=True, type=Path, help="kernel source (.cu for CUDA, .hip for HIP)")
    p.add_argument("--arch", help="GPU architecture (default: the GPU's own, else sm_90a / gfx942)")
    p.add_argument("--compile-only", action="store_true", help="compile and report resources; do not run")
    p.add_argument("--verify-only", action="store_true", help="check correctness; do not time")
    p.add_argument("--no-baselines", action="store_true", help="do not time the reference and vendor library")
    p.add_argument(
        "--held-out",
        type=int,
        default=DEFAULT_COUNT,
        metavar="N",
        help="also verify on N shapes of the problem's shape contract that it does not list, drawn now "
        f"(default: %(default)s; 0: none; at most {MAX_HELD_OUT})",
    )
    _timeout_option(p, 900.0)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    p.set_defaults(handler=cmd_evaluate)

    p = sub.add_parser("baseline", help="time the problem's reference and vendor library on this GPU")
    problem_and_target(p)
    _timeout_option(p, 1800.0)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    p.set_defaults(handler=cmd_baseline)

    p = sub.add_parser("profile", help="profile one kernel source on one shape (ncu / rocprofv3) and print the digest")
    add_profile_arguments(p)
    p.set_defaults(handler=cmd_profile)

    p = sub.add_parser("render", help="print a seed template rendered at a parameter point")
    problem_and_target(p)
    p.add_argument("--template", required=True, help="the template's name (see ksci problems --json)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a template parameter; repeat for each (default: the template's own defaults)",
    )
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    p.set_defaults(handler=cmd_render)


def add_run_and_porting_commands(sub) -> None:
    """report, status: a run's lineage; import, port: problems and kernels from elsewhere."""
    p = sub.add_parser("report", help="write a run's evolution report: one self-contained HTML file")
    _run_and_store(p)
    p.add_argument("-o", "--output", type=Path, help="HTML file to write (default: report.html in the run's folder)")
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser("status", help="a run's progress: generations, statuses, best so far, the best kernel")
    _run_and_store(p)
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("runs", help="the runs of a store: problem, target, simulated or measured, best, date")
    _store_option(p)
    p.add_argument("--json", action="store_true", help="print them as a JSON list on stdout")
    p.set_defaults(handler=cmd_runs)

    p = sub.add_parser("import", help="write a problem folder from a KernelBench file or a gpu-mode task")
    p.add_argument(
        "format", choices=("kernelbench", "gpumode"), help="what SOURCE is: a KernelBench file or a gpu-mode task"
    )
    p.add_argument(
        "source", type=Path, help="KernelBench: FILE.py; gpu-mode: the task's folder (task.yml, reference.py)"
    )
    p.add_argument("--name", help="the problem's name (default: the file's or folder's name)")
    p.add_argument("--dest", type=Path, help="folder to write it to (default: kernels/); every command then finds it")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a problem of that name in --dest: refreshes it when the task changed (problem.yaml records "
        "the source's sha256, a gpu-mode task's hash with its utils.py and its git commit)",
    )
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser(
        "port",
        help="convert a CUDA kernel to HIP (hipify-clang, else hipify-perl, else torch's) and compile the result; "
        "exit 0 only when it compiles",
    )
    p.add_argument("file", type=Path, help="the CUDA source (.cu)")
    p.add_argument("-o", "--output", type=Path, help="where to write the HIP source (default: FILE.hip)")
    p.add_argument("--arch", help="the AMD architecture to compile for (default: the GPU's own, else gfx942)")
    p.set_defaults(handler=cmd_port)


def problem_and_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", required=True, help="a problem's name (ksci problems lists them)")
    p.add_argument(
        "--target", choices=TARGETS, default="cuda", help="cuda (NVIDIA) or rocm (AMD) (default: %(default)s)"
    )


def _run_and_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="the run's name (a folder of the store)")
    _store_option(p)


def _store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help="lineage store: a folder or an fsspec URL (default: data/runs)")


def cmd_problems(args) -> int:
    """Every problem on the search path, one aligned line each; one whose problem.yaml does not load is listed as
    broken with its one-line reason while the others still list, and the exit code is then 1 (0 when all load), so
    that a script or CI notices."""
    entries = [problem_entry(name) for name in list_problems()]
    if args.json:
        print(json.dumps(entries, indent=1))
    else:
        for line in aligned([problem_cells(e) for e in entries]):
            print(line)
    return EXIT_FAILED if any("broken" in e for e in entries) else EXIT_OK


def cmd_evaluate(args) -> int:
    problem = load_problem(args.problem)
    source = _read_source(args.source)
    if not has_entry_point(source, problem.entry_name):
        raise UsageError(f'{args.source} does not define the entry point extern "C" {problem.entry_name}(...)')
    if not 0 <= args.held_out <= MAX_HELD_OUT:
        raise UsageError(f"--held-out {args.held_out}: give 0 to {MAX_HELD_OUT} shapes")
    phases = ("verify",) if args.verify_only else ("verify", "benchmark")
    options = EvaluationOptions(
        held_out=args.held_out,
        target=args.target,
        arch=args.arch,
        compile_only=args.compile_only,
        phases=phases,
        time_baselines=not args.no_baselines,
        timeout_s=args.timeout,
    )
    verdict = evaluate_source(problem, source, options)
    if verdict.compile and not (args.target == "rocm" and looks_like_cuda(source)):  # converted: kernel.hip's lines
        name_source(verdict.compile, str(args.source))
        verdict.message = with_source_name(verdict.message, str(args.source))
    print(json.dumps(verdict.to_dict(), indent=1) if args.json else format_verdict(verdict))
    return EXIT_OK if verdict.status in (Status.OK, Status.COMPILED) else EXIT_FAILED


def cmd_baseline(args) -> int:
    problem = load_problem(args.problem)
    verdict = measure_baselines(problem, EvaluationOptions(target=args.target, timeout_s=args.timeout))
    print(json.dumps(verdict.to_dict(), indent=1) if args.json else format_verdict(verdict))
    return EXIT_OK


def cmd_profile(args) -> int:
    """The digest of a profile (ksci/profile/); no profile (no profiler, no permission, ...) is exit code 1."""
    problem = load_problem(args.problem)
    profiled, error = print_profile(problem, _read_source(args.source), args)
    if error:
        raise UsageError(error)
    return EXIT_OK if profiled else EXIT_FAILED


def cmd_render(args) -> int:
    _check_output(args.output)
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


def cmd_report(args) -> int:
    from ksci.profile.store import read_profiles
    from ksci.report.html import build_report  # matplotlib loads for this command only

    _check_output(args.output)
    store, frame = _read_run(args)
    page = build_report(frame, store.read_source, read_profiles(store.root, args.run))
    if args.output:
        args.output.write_text(page)
        print(f"wrote {args.output}")
        return EXIT_OK
    # Beside the run's lineage, not in the current folder (often the repository's root, where git would see it);
    # through the store's storage, so a store at an fsspec URL gets its report there too.
    storage = store.storage
    path = storage.path(args.run, "report.html")
    storage.write_atomic(path, lambda f: f.write(page.encode()))
    print(f"wrote {path if storage.local else storage.fs.unstrip_protocol(path)}")
    return EXIT_OK


def cmd_status(args) -> int:
    from ksci.lineage.runs import started_without_rows
    from ksci.report.status import format_status  # no matplotlib: the status prints from the facts alone

    started = started_without_rows(_open_store(args), args.run)
    if started:  # known, with nothing to show yet: said as the run's status, not refused
        print(started)
        return EXIT_OK
    store, frame = _read_run(args)
    print(format_status(frame, args.run))
    from ksci.profile.store import profiling_line

    if line := profiling_line(store.root, args.run):
        print(line)
    return EXIT_OK


def cmd_runs(args) -> int:
    from ksci.lineage.runs import format_runs, list_runs

    store = _open_store(args)
    listing = list_runs(store)
    for warning in listing.warnings:
        print(f"ksci: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps([s.to_dict() for s in listing.runs], indent=1))
    else:
        print(format_runs(listing, store.root))
    return EXIT_OK


def _open_store(args):
    """The store of --store (default data/runs), refused in one line if it cannot be read (check_store_root)."""
    from ksci import PROJECT_ROOT
    from ksci.lineage.storage import check_store_root
    from ksci.lineage.store import LineageStore

    root = args.store or PROJECT_ROOT / "data" / "runs"
    problem = check_store_root(root, write=False)
    if problem:
        raise UsageError(problem)
    local = args.store and ("://" not in args.store or args.store.startswith("file://"))
    if local and not Path(args.store.removeprefix("file://")).exists():  # a --store given that is not there
        raise UsageError(f"no store at {args.store}: the folder does not exist")
    return LineageStore(root)


def _read_run(args):
    """The store and the run's rows; each damaged part skipped is named in a warning on stderr (and the rows of
    every other part still read), so that `ksci status` and `ksci report` say what they left out."""
    from ksci.lineage.runs import not_a_run

    store = _open_store(args)
    if args.run not in store.runs():
        raise UsageError(not_a_run(store, args.run))
    lineage = store.read_lineage(args.run)
    for warning in lineage.warnings():
        print(f"ksci: warning: {warning}", file=sys.stderr)
    return store, lineage.frame


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
    """Convert, write the HIP source, then compile it as the evaluation would (its toolchain, flags and cache).

    Exit 0 only for output that compiles; 1, naming what was left unconverted or the first compiler error, for a
    source that cannot be converted (nothing written) or whose conversion does not compile (written, to edit)."""
    source = _read_source(args.file)
    tools = find_hipify()
    if not tools:
        raise ToolchainMissing(
            "no CUDA-to-HIP converter: neither hipify-clang nor hipify-perl is on PATH (ROCm installs them in "
            "/opt/rocm/bin), and torch (torch.utils.hipify) is not installed"
        )
    converted = hipify_source(source, tools)
    if not converted.ok:
        print(
            f"ksci: cannot convert {args.file} to HIP (nothing written): {_conversion_failure(converted)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    output = args.output or args.file.with_suffix(".hip")
    try:
        output.write_text(converted.source)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from exc
    names = ", ".join(converted.unconverted)
    left = f"; left unconverted: {names}" if names else ""
    arch = args.arch or default_arch("rocm")
    try:
        toolchain = find_toolchain("rocm", arch)
    except ToolchainMissing as exc:
        raise ToolchainMissing(
            f"wrote {output} (converted with {converted.tool}{left}) but cannot compile it: {exc}"
        ) from exc
    compiled = compile_source(converted.source, toolchain, arch, DEFAULT_CACHE_DIR, source_name=str(output))
    if not compiled.ok:
        print(
            f"ksci: wrote {output} (converted with {converted.tool}{left}), but it does not compile for {arch} "
            f"({toolchain.version}):\n  {first_error(compiled.log)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"wrote {output} (converted with {converted.tool}; compiles for {arch}: {toolchain.version})")
    if names:
        print(f"note: CUDA names left as they were, which the HIP headers accept: {names}", file=sys.stderr)
    return EXIT_OK


def _conversion_failure(converted: HipifyResult) -> str:
    """The reason in one line: the refusal, or what the last converter left (the report's last line); when a
    converter failed otherwise, each one's output below."""
    lines = [line for line in converted.log.strip().splitlines() if line.strip()] or ["no output"]
    if len(lines) == 1 or LEFT_CUDA_ONLY in lines[-1]:
        return lines[-1].removeprefix(REFUSED)
    return "every converter failed:\n" + "\n".join(f"  {line}" for line in lines)


def _check_output(path: Path | None) -> None:
    """Refuse an -o file that cannot be written (no such folder, a folder) before the work that fills it."""
    from ksci.run import output_file_problem

    if path is not None and (wrong := output_file_problem(path)):
        raise UsageError(wrong)


def _read_source(path: Path) -> str:
    """The kernel source at `path`; anything but a readable regular text file is one line (rc 2)."""
    if not path.exists():
        raise UsageError(f"no such file: {path}")
    if not path.is_file():  # a FIFO would block the read, a device never end
        raise UsageError(f"{path} is not a regular file ({_file_kind(path)}): give a kernel source file")
    try:
        return path.read_text()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a text file") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _file_kind(path: Path) -> str:
    checks = (("a folder", path.is_dir), ("a FIFO", path.is_fifo), ("a socket", path.is_socket))
    checks += (("a character device", path.is_char_device), ("a block device", path.is_block_device))
    return next((kind for kind, check in checks if check()), "another kind of file")


def _parse_value(text: str):
    try:
        return int(text)
    except ValueError:
        return text


def _timeout_option(p, default: float) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=default,
        help="hard timeout of the harness process, seconds (default: %(default)s)",
    )
