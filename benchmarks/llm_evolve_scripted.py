"""The LLM scientist end to end against a SCRIPTED OpenAI-compatible server (no model): `ksci evolve --proposer llm`
for three generations of fp8_gemm on CUDA: generation 0 the seed templates, generations 1 and 2 three LLM
experiments each (selected, designed, written, compiled, verified, timed, recorded), with the scripted
misbehaviours of tests/support/fp8_gemm_script.py. Prints the LLM rows, the llm_calls summary and the findings,
then checks what the issue asks for. The token counts are the scripted server's (len/4) and the prices demo
prices, so the cost column shows the bookkeeping, not a provider's bill.

On an H100/H200:  python benchmarks/llm_evolve_scripted.py
Without a GPU:    python benchmarks/llm_evolve_scripted.py --simulate   (made-up timings, for rehearsal)
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

from support.fp8_gemm_script import demo_config_toml, demo_script  # noqa: E402
from support.scripted_llm_server import PromptKeepingServer  # noqa: E402

from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.llm.ledger import LlmLedger, summarize_calls  # noqa: E402

FAKE_KEY = "sk-test-SECRET123"  # the demo's key: it must show up in no file the run writes


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--simulate", action="store_true", help="no GPU: the simulator's made-up timings")
    parser.add_argument("--store", type=Path, help="lineage store (default: a temporary folder)")
    parser.add_argument("--run", default=f"llm-scripted-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument(
        "--prompts-out", type=Path, help="folder to keep each prompt the server received (one file each)"
    )
    args = parser.parse_args()
    store = args.store or Path(tempfile.mkdtemp(prefix="ksci-llm-demo-"))
    with PromptKeepingServer(demo_script()) as server:
        config = store / "ksci-llm-demo.toml"
        store.mkdir(parents=True, exist_ok=True)
        config.write_text(demo_config_toml(server.base_url))
        command = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", "fp8_gemm", "--target", "cuda"]
        command += ["--proposer", "llm", "--llm-config", str(config), "--generations", "3", "--children", "3"]
        command += ["--run", args.run, "--store", str(store)]
        command += ["--simulate"] if args.simulate else []
        env = {**os.environ, "KSCI_LLM_API_KEY": FAKE_KEY, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
        print("$", " ".join(command), flush=True)
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        print(done.stdout[-4000:])
        if done.returncode != 0:
            print(done.stderr[-8000:], file=sys.stderr)
        print(
            f"ksci evolve exit code {done.returncode} after {elapsed:.0f} s; scripted server saw "
            f"{server.count()} requests: " + ", ".join(f"{s} {server.count(s)}" for s in server.script)
        )
        if args.prompts_out:
            server.write_prompts(args.prompts_out)
    return report(store, args.run, done, FAKE_KEY)


def report(store: Path, run: str, done: subprocess.CompletedProcess, key: str) -> int:
    rows = LineageStore(store).read(run)
    ledger = LlmLedger(store)
    llm = rows[rows["proposer"] == "llm"]
    pd.set_option("display.width", 250, "display.max_colwidth", 70, "display.max_columns", 20)
    print("\nLLM-written candidates:")
    columns = ["generation", "candidate_id", "status", "geomean_us", "prompt_tokens", "completion_tokens", "cost_usd"]
    print(llm[columns + ["hypothesis"]].to_string(index=False))
    print("\nllm_calls per stage (every request sent; cache hits send none):")
    calls = ledger.calls(run)
    print(summarize_calls(calls).to_string(index=False))
    print("\nllm_calls that did not end ok:")
    print(calls[calls["outcome"] != "ok"][["generation", "stage", "slot", "outcome", "detail"]].to_string(index=False))
    print("\nfindings:")
    print(ledger.findings(run)[["generation", "kind", "text"]].to_string(index=False))

    checks = {"ksci evolve exited 0": done.returncode == 0}
    for generation in (1, 2):
        mine = llm[llm["generation"] == generation]
        timed = mine[(mine["status"] == "ok") & mine["geomean_us"].notna()]
        checks[f"generation {generation}: 3 LLM kernels timed ok"] = len(timed) == 3
        checks[f"generation {generation}: rows carry hypothesis, tokens, cost"] = bool(
            len(mine)
            and mine["hypothesis"].str.len().gt(0).all()
            and mine["completion_tokens"].notna().all()
            and mine["cost_usd"].notna().all()
        )
    checks["a compile error was repaired with the log"] = bool(
        ((llm["status"] == "compile_error") & (llm["generation"] == 2)).any()
        and llm["hypothesis"].str.startswith("(repair 1 after compile_error)").any()
    )
    checks["the key is in no file of the store"] = not _files_containing(store, key)
    checks["the key is in no output of the run"] = key not in done.stdout + done.stderr
    print("\nchecks:")
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    print(f"\nstore: {store} (run {run}); report: ksci report --run {run} --store {store}")
    return 0 if all(checks.values()) else 1


def _files_containing(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


if __name__ == "__main__":
    sys.exit(main())
