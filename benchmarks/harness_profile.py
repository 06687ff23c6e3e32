"""Where a harness child's seconds go (issue 28): its verify run, its benchmark run and its benchmark raced against
a best 10% faster, each run in this process (ksci.evaluate.harness.child.Session, no sandbox, no network drop)
under cProfile, on one compiled kernel (the problem's wgmma default). Prints per phase the wall time, the checks,
per benchmark shape the calls, full checks, median and host time per call, then cProfile's top functions by
cumulative and by own time. A diagnosis, not a timing claim: cProfile slows Python down. On a GPU host:

    python benchmarks/harness_profile.py [fp8_gemm_kmajor]
"""

import cProfile
import io
import pstats
import sys
import time

from ksci.evaluate.harness import child as C
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem


class Rep:
    """Keeps the child's reports (the Reporter's interface) with when they came."""

    def __init__(self, events: list):
        self.events = events

    def send(self, event, **f):
        self.events.append((time.perf_counter(), event, f))


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "fp8_gemm_kmajor"
    problem = load_problem(name)
    source = render_kernel(problem.template("cuda", "wgmma"))
    compiled = evaluate_source(problem, source, EvaluationOptions(compile_only=True))
    lib = compiled.compile.library
    print("library", lib, compiled.status)
    ref = problem.reference_module()
    events = []

    for phases, raced in ((["verify"], False), (["benchmark"], False), (["benchmark"], True)):
        req = {
            "problem": name,
            "target": "cuda",
            "phases": phases,
            "time_baselines": False,
            "policy": {},
            "tests": [],
            "benchmarks": [],
            "library": lib,
            "isolate_network": False,
        }
        # raced: against a best 10% faster than the plain benchmark's medians (the events of the run before)
        req["race"] = (
            {e[2]["key"]: 0.9 * e[2]["kernel"]["median_us"] for e in events if e[1] == "timing"} if raced else {}
        )
        events.clear()
        s = C.Session(req, Rep(events), problem, ref)
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        s.run()
        pr.disable()
        wall = time.perf_counter() - t0
        res = [e for e in events if e[1] == "result"]
        timings = [e[2] for e in events if e[1] == "timing"]
        calls = sum(t["integrity"]["calls"] for t in timings)
        print(
            f"\n==== {phases} race={raced}: wall {wall:.2f} s, result {res[-1][2] if res else None}, "
            f"timed calls {calls}, checks {sum(1 for e in events if e[1] == 'check')}"
        )
        for t in timings:
            i = t["integrity"]
            print(
                f"  {t['key']:>18s} calls {i['calls']:4d} checked {i['checked']:3d} median {t['kernel']['median_us']:8.1f} "
                f"host {i['shape_host_us'] / 1e3:8.1f} ms  per call {i['shape_host_us'] / i['calls']:7.0f} us"
            )
        out = io.StringIO()
        st = pstats.Stats(pr, stream=out)
        st.sort_stats("cumulative").print_stats(45)
        st.sort_stats("tottime").print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
