"""The sandbox against hostile host code on a GPU (issue 51), and what its confinement costs per evaluation.

Part 1 evaluates the four kernels kernels/fp8_gemm/solutions/adversarial/sandbox_*.cu through the whole pipeline
(screen, compile, library check, harness child on the GPU). Each makes its system calls as raw bytes (`.byte 0x0f,
0x05`), so only the sandbox stands in the way: a remount of a read-only folder and a write into it, a write
outside the scratch folder then an unshare, an AF_INET connect to a port of 127.0.0.1, a ptrace of the parent. Each
is aimed at a throwaway folder that the harness child sees read-only (added to KSCI_KERNELS_DIR, whose folders the
child gets read-only) and at a port this script listens on. A row passes when the verdict is not ok, its line names
the denied call the kernel's header names, nothing appeared in the folder (nor in /usr/local) and no connection
reached the port.

Part 2 (`--cost`): one honest kernel (rmsnorm's warp_per_row solution, both phases, no baselines: a candidate as an
evolution evaluates it) evaluated --reps times by this tree and by another (`--tree`: e.g. the tree of 796648c, before
the locked mounts, the capability drop and the syscall filter), interleaved, its compile cached; prints the median
seconds per evaluation of each, and the child's sandbox report. Usage, on a GPU host:

    python benchmarks/sandbox_hostile.py
    python benchmarks/sandbox_hostile.py --cost --tree ../ksci-796648c --reps 5

The exit status is 1 when a hostile kernel got through (or got another verdict than its header's).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ksci.evaluate.options import EvaluationOptions  # noqa: E402
from ksci.evaluate.stage_order import evaluate_source  # noqa: E402
from ksci.problem.spec import load_problem  # noqa: E402

KERNELS = sorted((HERE / "kernels" / "fp8_gemm" / "solutions" / "adversarial").glob("sandbox_*.cu"))
QUICK = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}
# One evaluation of an honest kernel, in a process of the tree under test; prints seconds, status and sandbox.
COST = """
import json, sys, time
from pathlib import Path
from ksci.evaluate.options import EvaluationOptions
try:
    from ksci.evaluate.stage_order import evaluate_source
except ImportError:  # a tree before ksci/evaluate was grouped
    from ksci.evaluate.pipeline import evaluate_source
from ksci.problem.spec import load_problem
problem = load_problem("rmsnorm")
source = (problem.root / "solutions" / "correct" / "warp_per_row.cu").read_text()
options = EvaluationOptions(target="cuda", time_baselines=False, cache_dir=Path(sys.argv[1]))
evaluate_source(problem, source, options)  # the compile, cached for the timed evaluations
for _ in range(int(sys.argv[2])):
    start = time.monotonic()
    verdict = evaluate_source(problem, source, options)
    print(json.dumps({"s": time.monotonic() - start, "status": str(verdict.status),
                      "sandbox": verdict.fingerprint.get("sandbox")}), flush=True)
"""


def aimed(path: Path, folder: Path, port: int) -> str:
    """The kernel's source aimed at `folder` and `port` instead of /usr/local and 4200."""
    text = path.read_text().replace('#define TARGET "/usr/local"', f'#define TARGET "{folder}"')
    return text.replace("#define PORT 4200", f"#define PORT {port}")


def written_outside(folder: Path, server: socket.socket) -> list[str]:
    """What an attack left behind: files in the aimed folder or in /usr/local, a connection to the port."""
    found = [str(p) for p in folder.iterdir()] + [str(p) for p in Path("/usr/local").glob("ksci-sandbox-*")]
    server.setblocking(False)
    try:
        connection, _ = server.accept()
        connection.close()
        found.append("a connection reached 127.0.0.1")
    except BlockingIOError:
        pass
    return found


def hostile_rows() -> int:
    """Part 1: prints the table; returns how many kernels got through."""
    problem = load_problem("fp8_gemm")
    failures = 0
    print(f"{'kernel':22s} {'verdict':14s} {'s':>5s}  {'written outside':24s} line")
    for path in KERNELS:
        denied = path.read_text().split("crashed: denied system call ", 1)[1].split("`", 1)[0]
        with tempfile.TemporaryDirectory(prefix="ksci-hostile-") as tmp, socket.socket() as server:
            folder = Path(tmp)
            folder.chmod(0o755)
            server.bind(("127.0.0.1", 0))
            server.listen()
            os.environ["KSCI_KERNELS_DIR"] = os.pathsep.join([str(HERE / "kernels"), str(folder)])
            options = EvaluationOptions(
                target="cuda", benchmarks=problem.benchmarks[:2], policy=QUICK, time_baselines=False
            )
            start = time.monotonic()
            verdict = evaluate_source(problem, aimed(path, folder, server.getsockname()[1]), options)
            seconds = time.monotonic() - start
            left = written_outside(folder, server)
        good = verdict.message == f"crashed: denied system call {denied}" and not left
        failures += not good
        mark = "" if good else f"  <-- expected 'crashed: denied system call {denied}', nothing written"
        shown = "; ".join(left) or "nothing"
        print(f"{path.stem:22s} {verdict.status:14s} {seconds:5.1f}  {shown:24s} {verdict.message[:100]}{mark}")
        sandbox = verdict.fingerprint.get("sandbox")
    os.environ.pop("KSCI_KERNELS_DIR", None)
    print(f"\n{len(KERNELS)} hostile kernels, {failures} got through; the child's sandbox: {json.dumps(sandbox)}")
    return failures


def cost(trees: dict[str, Path], reps: int) -> None:
    """Part 2: seconds per evaluation of one honest kernel, each tree in a process of its own, interleaved."""
    seconds: dict[str, list[float]] = {label: [] for label in trees}
    reports = {}
    with tempfile.TemporaryDirectory(prefix="ksci-cost-") as cache:
        for _ in range(reps):
            for label, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree)}
                env.pop("KSCI_KERNELS_DIR", None)
                done = subprocess.run(
                    [sys.executable, "-c", COST, f"{cache}/{label}", "1"], cwd=tree, env=env, capture_output=True,
                    text=True, timeout=600,
                )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(f"{label} ({tree}): {done.stderr.strip().splitlines()[-1:]}")
                report = json.loads(done.stdout.strip().splitlines()[-1])
                seconds[label].append(report["s"])
                reports[label] = report
    print(f"\n{'tree':8s} {'median s/evaluation':>20s} {'runs':>5s}  status  sandbox")
    for label, values in seconds.items():
        report = reports[label]
        line = f"{statistics.median(values):20.3f} {len(values):5d}  {report['status']:6s}  {json.dumps(report['sandbox'])}"
        print(f"{label:8s} {line}")
    if len(seconds) == 2:
        (new, a), (old, b) = seconds.items()
        change = statistics.median(a) / statistics.median(b) - 1
        print(f"{new} against {old}: {change:+.1%} per evaluation (rmsnorm warp_per_row, both phases)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cost", action="store_true", help="also time one honest evaluation per tree")
    parser.add_argument("--tree", type=Path, help="another tree to time against (e.g. 796648c's)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-hostile", action="store_true", help="skip part 1")
    args = parser.parse_args()
    failures = 0 if args.no_hostile else hostile_rows()
    if args.cost:
        trees = {"this": HERE, **({"other": args.tree.resolve()} if args.tree else {})}
        cost(trees, args.reps)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
