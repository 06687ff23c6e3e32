"""Development benchmark of the Hopper FP8 wgmma templates (fp8_gemm_kmajor and fp8_gemm) next to cuBLASLt.

Renders template points, builds them with ksci's compile path (ksci.evaluate.toolchain.compile.compile_source; the static screen and
the library check are run and reported, not enforced, as this script is for iterating on the kernels), loads each
library with ctypes, checks it against the problem's reference() on test shapes (fresh inputs, poisoned output,
the problem's rtol/atol per element), then times every benchmark shape with CUDA events (L2 flushed before each
call, median of --reps) beside the problem's vendor() in the same process. One table per problem; full logs (JSON)
go to --out (default $OUT). The final numbers are ksci's harness's (`ksci evaluate`), not this script's.
A --point outside the problem's declared space (an unknown name, a value not in its list, a problem.yaml constraint
violated) stops the script before any build, with the reasons; --outside-space builds points that only violate a
constraint (names and values the renderer refuses stay refused).

    PYTHONPATH=$PWD python3 benchmarks/hopper_fp8.py [--problems fp8_gemm_kmajor,fp8_gemm]
        [--point BM=128,BN=128,CONSUMERS=2,STAGES=5,GROUP_M=8 ...] [--reps 30] [--quick] [--check-only]
        [--check-benchmarks] [--outside-space]
    ncu ... python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --profile-vendor
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ksci.evaluate.screen.source import screen_source
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import default_arch, find_toolchain
from ksci.problem.render import check_params, render_kernel
from ksci.problem.roofline import peaks_for, speed_of_light_us
from ksci.problem.spec import ProblemError, load_problem

DEFAULT_POINTS = (
    "",  # the template's default point
    "OVERLAP=0",
    "SPLIT_K=1",
    "BN=256,N_PARTS=2,STAGES=3,OVERLAP=0",
    "BN=192,STAGES=4,OVERLAP=0",
    "BN=112",
)


def parse_point(text: str) -> dict:
    pairs = [kv.split("=") for kv in text.split(",") if kv]
    if any(len(kv) != 2 or not kv[1].strip().lstrip("-").isdigit() for kv in pairs):
        raise SystemExit(f"--point {text!r}: write K=V pairs with whole numbers, separated by commas")
    return {k.strip(): int(v) for k, v in pairs}


def point_errors(template, point: dict, constraints: bool = True) -> list[str]:
    """Why the point (over the template's default) is outside the template's declared space: a name or value that
    rendering refuses (ksci.problem.render.check_params), else the problem.yaml constraints it violates (unless
    `constraints` is False). Empty when it is inside."""
    try:
        full = check_params(template, point)
    except ProblemError as exc:
        return [str(exc)]
    return [f"violates {text}" for text in template.violations(full)] if constraints else []


def points_of(name: str, texts: list[str] | None, args, log) -> list[dict]:
    """The points to build for one problem. Given points outside the problem's declared space stop the script before
    any build or GPU work (--outside-space lets constraint violations through, for an experiment whose template is
    not the declared one); of the built-in list, those outside this problem's space are left out, with a line
    saying why."""
    template = wgmma_template(load_problem(name), args)
    if texts:
        points = [parse_point(t) for t in texts]
        errors = [
            f"{name} {text}: {e}"
            for text, point in zip(texts, points, strict=True)
            for e in point_errors(template, point, constraints=not args.outside_space)
        ]
        if errors:
            raise SystemExit(
                "points outside the declared space (--outside-space to build those that only violate its "
                "constraints):\n  " + "\n  ".join(errors)
            )
        return points
    kept = []
    for text in DEFAULT_POINTS:
        point = parse_point(text)
        errors = point_errors(template, point)
        if errors:
            log(f"[{name}] built-in point {text or 'default'} left out: {'; '.join(errors)}")
        else:
            kept.append(point)
    return kept


def build(problem, template, point: dict, cache: Path) -> dict:
    """Render and compile one point; returns a record with the library path or the log."""
    source = render_kernel(template, point)
    screened = screen_source(source)
    result = compile_source(source, find_toolchain("cuda"), default_arch("cuda"), cache)
    record = {
        "point": point,
        "ok": result.ok,
        "library": result.library,
        "screen": screened.message or "passes",
        "log": result.log[-3000:],
    }
    if result.ok:
        try:
            from ksci.evaluate.screen.library import check_library

            record["libcheck"] = check_library(result.library, "cuda").message or "passes"
        except ImportError as exc:  # pyelftools may be missing on the device
            record["libcheck"] = f"not run ({exc})"
    return record


def sass_summary(library: str) -> str:
    """Counts of the matrix instructions in the library's SASS (QGMMA = FP8 wgmma), if cuobjdump is there."""
    try:
        sass = subprocess.run(["cuobjdump", "--dump-sass", library], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "cuobjdump not found"
    ops = ("QGMMA", "HGMMA", "HMMA", "UTMALDG", "USETMAXREG")
    counts = {op: len(re.findall(r"\b" + op + r"\b", sass)) for op in ops}
    return " ".join(f"{op}={n}" for op, n in counts.items())


def load_entry(library: str, name: str):
    fn = getattr(ctypes.CDLL(library), name)
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def call(fn, problem, inputs: dict, shape: dict) -> int:
    args = []
    for name in problem.entry_args:
        if name == "stream":
            args.append(torch.cuda.current_stream().cuda_stream)
        elif name in inputs:
            args.append(inputs[name].data_ptr())
        else:
            args.append(int(shape[name]))
    return fn(*args)


def check(fn, problem, ref, shapes: list[dict]) -> list[str]:
    """Failures (empty when every shape passes): fresh inputs, NaN-poisoned output, elementwise tolerance.
    fn None checks the problem's vendor() instead."""
    failures = []
    for shape in shapes:
        for attempt in range(1 if fn is None else 2):  # a second call: scratch state (split-K counters) was reset
            failures += check_once(fn, problem, ref, shape, attempt)
    return failures


def check_once(fn, problem, ref, shape: dict, attempt: int) -> list[str]:
    failures = []
    with torch.no_grad():
        inputs = ref.generate_input(shape, shape["seed"] + 1 + attempt, "cuda", "cuda")
        inputs["c"].fill_(float("nan"))
        if fn is None:
            got = ref.vendor(inputs)()["c"].float()
            rc = 0
        else:
            rc = call(fn, problem, inputs, shape)
            got = inputs["c"].float()
        torch.cuda.synchronize()
        if rc != 0:
            return [f"{shape}: returned {rc}"]
        expected = ref.reference(inputs)["c"].float()
        err = (got - expected).abs()
        tolerance = problem.tolerance("cuda")
        atol = tolerance.atol + tolerance.atol_rms * expected.pow(2).mean().sqrt().item()
        tol = atol + tolerance.rtol * expected.abs()
        bad = ~(err <= tol)
        if bad.any():
            idx = bad.nonzero()[0].tolist()
            worst = (err / tol).nan_to_num(float("inf")).max().item()
            failures.append(
                f"{shape['m']}x{shape['n']}x{shape['k']} call {attempt + 1}: {int(bad.sum())} of {bad.numel()} wrong"
                f" (worst err/tol {worst:.2f}), first at {idx}: {got[tuple(idx)].item()} vs"
                f" {expected[tuple(idx)].item()}"
            )
    return failures


def time_us(run, flush: torch.Tensor, reps: int) -> float:
    """Median over reps of one call, L2 flushed (a 256 MB write) before each."""
    for _ in range(3):
        run()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def wgmma_template(problem, args):
    """The problem's wgmma template, or the same file name in --template-dir (an older copy, for an A/B)."""
    template = problem.template("cuda", "wgmma")
    if args.template_dir:
        template = dataclasses.replace(template, path=Path(args.template_dir) / template.path.name)
    return template


def bench_problem(name: str, points: list[dict], args, out: Path, log) -> dict:
    problem = load_problem(name)
    template = wgmma_template(problem, args)
    ref = problem.reference_module()
    cache = Path(args.cache)
    with ThreadPoolExecutor(max_workers=min(16, len(points))) as pool:
        builds = list(pool.map(lambda p: build(problem, template, p, cache), points))
    peaks = peaks_for(torch.cuda.get_device_name())
    tests = list(problem.tests) if not args.quick else list(problem.tests)[:4]
    if args.check_benchmarks:
        tests += list(problem.benchmarks)
    benches = list(problem.benchmarks)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    results = {"problem": name, "points": []}
    results["vendor_failures"] = check(None, problem, ref, tests)
    log(f"[{name}] cuBLASLt correctness: {results['vendor_failures'][:4] or 'ok'}")
    live = []
    for rec in builds:
        label = ",".join(f"{k}={v}" for k, v in sorted({**template.default, **rec["point"]}.items()))
        rec["label"] = label
        log(f"[{name}] {label}: compiled={rec['ok']} screen={rec['screen']} libcheck={rec.get('libcheck')}")
        log("  " + " | ".join(ln.strip() for ln in rec["log"].splitlines() if "registers" in ln or "spill" in ln))
        if rec["ok"]:
            log(f"  SASS: {sass_summary(rec['library'])}")
        if not rec["ok"]:
            log(rec["log"])
            results["points"].append(rec)
            continue
        fn = load_entry(rec["library"], problem.entry_name)
        rec["failures"] = check(fn, problem, ref, tests)
        log(f"  correctness: {'ok' if not rec['failures'] else rec['failures'][:4]}")
        results["points"].append(rec)
        live.append((rec, fn))
    rows = []
    if args.check_only:
        return results
    for shape in benches:
        inputs = ref.generate_input(shape, shape["seed"], "cuda", "cuda")
        row = {"shape": shape, "sol": speed_of_light_us(ref.flops(shape), ref.bytes_moved(shape), peaks, "fp8")}
        vendor = ref.vendor(inputs)
        row["cublaslt"] = time_us(vendor, flush, args.reps) if vendor else float("nan")
        for rec, fn in live:
            row[rec["label"]] = time_us(
                lambda fn=fn, inputs=inputs, shape=shape: call(fn, problem, inputs, shape), flush, args.reps
            )
        rows.append(row)
    results["rows"] = rows
    labels = [rec["label"] for rec, _ in live]
    log(f"\n== {name} on {torch.cuda.get_device_name()} (us, median of {args.reps}, L2 flushed) ==")
    for i, (rec, _) in enumerate(live):  # the correctness beside each point, so that a table read alone says it
        verdict = (
            "correct" if not rec["failures"] else f"WRONG, {len(rec['failures'])} failed checks: timed, not usable"
        )
        log(f"  P{i}: {rec['label']} ({verdict})")
    header = f"{'m x n x k':>18} {'SoL':>7} {'cuBLASLt':>9} " + " ".join(
        f"{'P' + str(i):>8}" for i in range(len(labels))
    )
    log(header)
    for row in rows:
        s = row["shape"]
        cells = " ".join(f"{row[label]:8.1f}" for label in labels)
        log(f"{s['m']:>6}x{s['n']:>5}x{s['k']:>5} {row['sol']:7.1f} {row['cublaslt']:9.1f} {cells}")
    gm = {key: geomean([r[key] for r in rows]) for key in ["sol", "cublaslt", *labels]}
    log(f"{'geomean':>18} {gm['sol']:7.1f} {gm['cublaslt']:9.1f} " + " ".join(f"{gm[lb]:8.1f}" for lb in labels))
    log(f"{'cuBLASLt / point':>18} {'':7} {'':9} " + " ".join(f"{gm['cublaslt'] / gm[lb]:8.2f}" for lb in labels))
    log(f"{'SoL / point':>18} {'':7} {'':9} " + " ".join(f"{gm['sol'] / gm[lb]:8.2f}" for lb in labels))
    results["geomean"] = gm
    return results


def profile(name: str, point: dict, args) -> int:
    """Three calls of one point on one shape, nothing else: a target for ncu."""
    problem = load_problem(name)
    rec = build(problem, wgmma_template(problem, args), point, Path(args.cache))
    fn = load_entry(rec["library"], problem.entry_name)
    m, n, k = (int(x) for x in args.profile.split(","))
    shape = {"m": m, "n": n, "k": k, "seed": 1}
    inputs = problem.reference_module().generate_input(shape, 1, "cuda", "cuda")
    for _ in range(3):
        call(fn, problem, inputs, shape)
    if args.profile_vendor:  # the vendor library's kernels on the same inputs, for a side-by-side ncu report
        vendor = problem.reference_module().vendor(inputs)
        for _ in range(3):
            vendor()
    torch.cuda.synchronize()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="fp8_gemm_kmajor,fp8_gemm")
    parser.add_argument("--point", action="append", help="K=V,K=V (repeatable); default: a built-in list")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--profile", help="M,N,K: only run the first point 3 times on this shape (for ncu)")
    parser.add_argument(
        "--template-dir",
        help="render wgmma.cu.j2 (and what it includes) from this folder instead: an older copy, for an A/B in one call",
    )
    parser.add_argument("--profile-vendor", action="store_true", help="with --profile: then 3 vendor calls too")
    parser.add_argument("--quick", action="store_true", help="check on the first 4 test shapes only")
    parser.add_argument("--check-benchmarks", action="store_true", help="check the benchmark shapes too")
    parser.add_argument("--check-only", action="store_true", help="build and check the points, time nothing")
    parser.add_argument("--out", default=os.environ.get("OUT", "data/hopper_fp8"))
    parser.add_argument("--cache", default="/tmp/hopper_fp8_cache", help="compile cache (kept out of --out)")
    parser.add_argument(
        "--outside-space",
        action="store_true",
        help="build points that violate the declared constraints (for an experiment's template)",
    )
    args = parser.parse_args()
    lines = []

    def log(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    problems = args.problems.split(",")[:1] if args.profile else args.problems.split(",")
    points = {name: points_of(name, args.point, args, log) for name in problems}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        return profile(problems[0], points[problems[0]][0], args)
    started = time.time()
    all_results = []
    for name in problems:
        all_results.append(bench_problem(name, points[name], args, out, log))
        (out / "hopper_fp8.json").write_text(json.dumps(all_results, indent=1, default=str))
        (out / "hopper_fp8.log").write_text("\n".join(lines) + "\n")
    log(f"done in {time.time() - started:.0f} s")
    (out / "hopper_fp8.log").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
