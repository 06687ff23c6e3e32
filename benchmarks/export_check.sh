#!/usr/bin/env bash
# Issue 54's check on a GPU host: `ksci export` of a run's best kernel, installed into a fresh virtual environment
# with pip (offline), passes its own tests there, runs inside a torch.compile'd function, and the DeepSeek-V3 expert
# MLP (benchmarks/deepseek_fp8_layer.py) prints its time with the op and with cuBLASLt per token count.
#   1. ksci export --run RUN --store STORE -o OUT/pkg (the run's best ok candidate, built for its own arch);
#   2. python3 -m venv --system-site-packages OUT/venv; where torch is not importable there (python3 is itself a
#      venv, whose packages --system-site-packages does not reach), a .pth file adds python3's site-packages;
#   3. pip install --no-build-isolation --no-deps --no-index OUT/pkg in it (no network, no compiler);
#   4. the package's tests (pytest OUT/pkg/tests, run from outside OUT/pkg so that the installed copy is imported);
#   5. a torch.compile(fullgraph=True)'d function calling the op, checked against reference.py;
#   6. the package's bench.py (op beside the vendor library, benchmark shapes) and the layer benchmark.
# Usage: benchmarks/export_check.sh OUT [RUN] [STORE]
#   RUN: default the newest measured fp8_gemm_kmajor run of STORE (default data/runs). PYTHON: default python3.
# Success: "export_check: ok" last; every step's output in OUT/*.log and on stdout.
set -uo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "$1") store=${3:-$root/data/runs}
python=${PYTHON:-python3}
cd "$root" || exit 2
mkdir -p "$out"
run=${2:-$(PYTHONPATH=$root $python -m ksci.cli runs --store "$store" --json | $python -c '
import json, sys
runs = [r for r in json.load(sys.stdin) if r["problem"] == "fp8_gemm_kmajor" and not r["simulated"] and r["best_us"]]
print(max(runs, key=lambda r: r["last_time"] or "")["name"] if runs else "")')}
[ -n "$run" ] || { echo "export_check: no measured fp8_gemm_kmajor run with an ok candidate in $store" >&2; exit 2; }
step() { echo "== $1 ($(date -u +%T))"; }
fail() { echo "export_check: FAILED at $1" >&2; exit 1; }

step "1. ksci export --run $run"
rm -rf "$out/pkg" "$out/venv"
PYTHONPATH=$root $python -m ksci.cli export --run "$run" --store "$store" -o "$out/pkg" 2>&1 | tee "$out/export.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "export"
sed -n '/## Where it came from/,/## Install/p' "$out/pkg/README.md"

step "2. fresh venv"
$python -m venv --system-site-packages "$out/venv" || $python -m venv --system-site-packages --without-pip "$out/venv" ||
  fail "venv"
v=$out/venv/bin/python
if ! $v -c "import torch" 2>/dev/null; then
  site=$($v -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  $python -c "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])" >"$site/_base_site.pth"
  echo "torch not visible through --system-site-packages; added $(paste -sd' ' "$site/_base_site.pth") by $site/_base_site.pth"
fi
wheels='import setuptools.command.bdist_wheel'  # setuptools >= 70.1 builds wheels itself; older ones need `wheel`
if ! $v -c "$wheels" 2>/dev/null && ! $v -c "import wheel" 2>/dev/null; then
  echo "the venv's own setuptools cannot build a wheel offline (Python < 3.12's venv bundles setuptools 65): removed"
  $v -m pip uninstall -y -q setuptools
fi
$v -c "import torch, setuptools, pytest; print('venv:', torch.__version__, 'setuptools', setuptools.__version__)" ||
  fail "venv lacks torch, setuptools or pytest"
$v -c "$wheels" 2>/dev/null || $v -c "import wheel" 2>/dev/null || fail "no setuptools >= 70.1 (nor wheel) to build with"
$v -m pip --version || fail "no pip in the venv (nor in python3's site-packages)"

step "3. pip install --no-build-isolation --no-deps --no-index"
$v -m pip install --no-build-isolation --no-deps --no-index "$out/pkg" 2>&1 | tail -3 | tee "$out/pip.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "pip install"
(cd / && $v -c "import ksci_fp8_gemm_kmajor as p; print('installed at', p.__file__)") | tee -a "$out/pip.log"

step "4. the package's tests"
(cd / && $v -m pytest -q -p no:cacheprovider "$out/pkg/tests" 2>&1) | tee "$out/tests.log" | tail -15
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the package's tests"

step "5. torch.compile'd call"
(cd / && $v - <<'PY' 2>&1) | tee "$out/compile.log"
import torch
import ksci_fp8_gemm_kmajor as pkg
from ksci_fp8_gemm_kmajor import reference

op = torch.ops.ksci_fp8_gemm_kmajor.fp8_gemm_kmajor
shape = {"m": 2048, "n": 4096, "k": 7168}
x = reference.generate_input(shape, 4242, "cuda", "cuda", profile="full_range")
args = (x["a"], x["b"], x["a_scale"], x["b_scale"])


@torch.compile(fullgraph=True)
def projected(a, b, a_scale, b_scale):
    return torch.nn.functional.silu(op(a, b, a_scale, b_scale).float()).sum(dim=1)


got = projected(*args)
want = torch.nn.functional.silu(reference.reference(x)["c"].float()).sum(dim=1)
error = ((got - want).norm() / want.norm()).item()
print(f"torch.compile(fullgraph=True) of op + silu + sum at {shape}: relative L2 error {error:.2e} against reference.py")
assert error < 1e-2, error
print("torch.compile: ok")
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "torch.compile"

step "6. bench.py and the layer benchmark"
(cd / && $v "$out/pkg/bench.py" --reps 30 2>&1) | tee "$out/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "bench.py"
(cd / && $v "$root/benchmarks/deepseek_fp8_layer.py" 2>&1) | tee "$out/layer.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the layer benchmark"
echo "export_check: ok"
