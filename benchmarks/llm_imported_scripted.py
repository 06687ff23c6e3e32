"""The LLM scientist on two IMPORTED problems, against a SCRIPTED OpenAI-compatible server (no model): the
KernelBench test problem level2_gemm_multiply_leakyrelu and the gpu-mode task fp8_mm (tests/data/) are imported
into a temporary folder, then `ksci evolve --proposer llm` runs two generations of each: generation 0 written from
the reference (neither has a seed template), generation 1 selected, designed and written from generation 0
(tests/support/imported_script.py). Prints the lineage rows, the llm_calls per stage, writes each run's HTML report,
and checks what the issue asks for. The kernels are the hand-written ones of tests/data/; token counts and prices
are the scripted server's and the demo's.

On an H100/H200:  python benchmarks/llm_imported_scripted.py
Without a GPU:    python benchmarks/llm_imported_scripted.py --simulate   (made-up timings, for rehearsal)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests/support: the scripted LLM server and its scripts

from support.fp8_gemm_script import demo_config_toml  # noqa: E402
from support.imported_problems import import_all  # noqa: E402
from support.imported_script import imported_script  # noqa: E402
from support.scripted_llm_server import ScriptedLlmServer  # noqa: E402

from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.llm.ledger import LlmLedger, summarize_calls  # noqa: E402

PROBLEMS = ("level2_gemm_multiply_leakyrelu", "fp8_mm")
KEY = "sk-test-SECRET123"


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--simulate", action="store_true", help="no GPU: the simulator's made-up timings")
    parser.add_argument("--store", type=Path, help="lineage store (default: a temporary folder)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ksci-llm-imported-"))
    store = args.store or work / "store"
    kernels = work / "kernels"
    import_all(kernels)
    env = {
        **os.environ,
        "KSCI_LLM_API_KEY": KEY,
        "KSCI_KERNELS_DIR": str(kernels),
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    }
    checks = {}
    with ScriptedLlmServer(imported_script(list(PROBLEMS))) as server:
        config = work / "ksci-llm-demo.toml"
        config.write_text(demo_config_toml(server.base_url))
        for problem in PROBLEMS:
            run = f"imported-{problem}-{time.strftime('%Y%m%d-%H%M%S')}"
            command = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", problem, "--target", "cuda"]
            command += ["--proposer", "llm", "--llm-config", str(config), "--generations", "2", "--children", "2"]
            command += ["--run", run, "--store", str(store), *(["--simulate"] if args.simulate else [])]
            print("$", " ".join(command), flush=True)
            started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            print(done.stdout[-3000:])
            if done.returncode != 0:
                print(done.stderr[-6000:], file=sys.stderr)
            print(f"exit code {done.returncode} after {time.monotonic() - started:.0f} s")
            checks.update(report(store, run, problem, done))
        print("scripted server requests: " + ", ".join(f"{s} {server.count(s)}" for s in server.script))
    print("\nchecks:")
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


def report(store: Path, run: str, problem: str, done: subprocess.CompletedProcess) -> dict[str, bool]:
    rows = LineageStore(store).read(run) if run in LineageStore(store).runs() else pd.DataFrame()
    pd.set_option("display.width", 250, "display.max_colwidth", 60, "display.max_columns", 20)
    if not rows.empty:
        columns = ["generation", "candidate_id", "parent_id", "status", "geomean_us", "hypothesis"]
        shown = rows.sort_values(["generation", "candidate_id"])[columns].copy()
        shown["hypothesis"] = shown["hypothesis"].str.slice(0, 60)
        print(shown.to_string(index=False))
        print(summarize_calls(LlmLedger(store).calls(run)).to_string(index=False))
        html = store / f"{run}-report.html"
        subprocess.run(
            [sys.executable, "-m", "ksci.cli", "report", "--run", run, "--store", str(store), "-o", str(html)]
        )
        print(f"report: {html}")
    gen0 = rows[rows["generation"] == 0] if not rows.empty else rows
    gen1 = rows[rows["generation"] == 1] if not rows.empty else rows
    ok0 = gen0[gen0["status"] == "ok"] if not gen0.empty else gen0
    return {
        f"{problem}: ksci evolve exited 0": done.returncode == 0,
        f"{problem}: generation 0 written from the reference, timed ok": bool(
            len(ok0) == 2 and gen0["parent_id"].isna().all() and (gen0["proposer"] == "llm").all()
        ),
        f"{problem}: generation 1 from generation 0, timed ok": bool(
            len(gen1) == 2
            and (gen1["status"] == "ok").all()
            and gen1["parent_id"].isin(set(gen0["candidate_id"])).all()
        ),
        f"{problem}: the key is in no output": KEY not in done.stdout + done.stderr,
    }


if __name__ == "__main__":
    sys.exit(main())
