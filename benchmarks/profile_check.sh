#!/usr/bin/env bash
# Issue 29's check on a GPU host: does `ksci profile`'s digest agree with a hand-run Nsight Compute?
#   1. `ksci profile --problem PROBLEM --source SOURCE --keep-csv OUT/ncu` prints the digest (kept in OUT/digest.txt);
#      --keep-csv also keeps the runner's request (request.json), the library it profiled (library.txt) and ncu's
#      command line (command.txt);
#   2. ncu by hand on exactly that library and request (the same runner, NVTX range and interpreter), with ncu's own
#      human-readable details page: --section SpeedOfLight --section WarpStateStats --section Occupancy, the
#      tensor-pipe metric the digest names, launch__registers_per_thread and the per-reason stall ratios (smsp__average_warps_issue_stalled_*),
#      written to OUT/ncu_hand.txt;
#   3. prints both side by side: each digest line, then the ncu lines that measure the same thing.
# Usage: benchmarks/profile_check.sh PROBLEM SOURCE OUT
#   e.g. benchmarks/profile_check.sh fp8_gemm_kmajor kernels/fp8_gemm_kmajor/solutions/<wgmma default>.cu out/prof
# Environment: PYTHON (default .venv/bin/python, else python3), NCU (default: ncu on PATH, else CUDA's),
#   SHAPE (a benchmark shape key for --shape; default ksci's: the benchmark with the most work).
set -uo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
problem=$1 source=$(realpath "$2") out=$(realpath -m "$3")
cd "$root" || exit 2
python=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
ncu_bin=${NCU:-$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)}
if [ -z "$ncu_bin" ]; then
  echo "profile_check: no ncu on PATH or under /usr/local/cuda*/bin (set NCU)" >&2
  exit 1
fi
mkdir -p "$out/hand"

# 1. ksci profile, keeping what it profiled.
PATH="$(dirname "$ncu_bin"):$PATH" "$python" -m ksci.cli profile --problem "$problem" --source "$source" \
  --keep-csv "$out/ncu" ${SHAPE:+--shape "$SHAPE"} >"$out/digest.txt" 2>"$out/ksci_profile.err"
rc=$?
if [ $rc -ne 0 ] || [ ! -f "$out/ncu/request.json" ]; then
  echo "profile_check: ksci profile gave no profile (rc $rc):" >&2
  cat "$out/digest.txt" "$out/ksci_profile.err" >&2
  exit 1
fi

# 2. ncu by hand on the same library and request (a copy, so the runner's device.json lands in OUT/hand).
cp "$out/ncu/request.json" "$out/hand/request.json"
library=$(cat "$out/ncu/library.txt")
if ! grep -qF "$(basename "$library")" "$out/hand/request.json"; then
  echo "profile_check: request.json does not name the kept library $library" >&2
  exit 1
fi
tensor=$(grep -o 'sm__[a-z_]*\.avg\.pct_of_peak_sustained_active' "$out/digest.txt" | head -1)
tensor=${tensor:-sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active}
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
LC_ALL=C PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$ncu_bin" --target-processes all \
  --nvtx --nvtx-include ksci_profile/ \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics "$tensor,launch__registers_per_thread,$stalls" \
  "$python" -m ksci.profile.runner "$out/hand/request.json" >"$out/ncu_hand.txt" 2>&1
hand_rc=$?

# 3. Side by side: a digest line, then ncu's lines on the same quantity (each profiled launch is a line).
echo "== ksci profile (library $library; ksci's own ncu command in $out/ncu/command.txt)"
head -3 "$out/digest.txt"
echo "== hand-run ncu, exit $hand_rc: $out/ncu_hand.txt"
pairs=(
  "tensor pipe busy|${tensor//./\\.}"
  "SM throughput|Compute \(SM\) Throughput"
  "memory throughput|Memory Throughput|DRAM Throughput|Duration"
  "occupancy achieved|Achieved Occupancy|Theoretical Occupancy|Block Limit"
  "top stalls|Warp Cycles Per Issued Instruction|issue_stalled"
  "registers per thread|Registers Per Thread|launch__registers_per_thread|Shared Memory Per Block"
)
for pair in "${pairs[@]}"; do
  mine=${pair%%|*} theirs=${pair#*|}
  echo
  echo "digest: $(grep -m1 "^$mine" "$out/digest.txt" || echo "(no line '$mine')")"
  grep -E "$theirs" "$out/ncu_hand.txt" | sed -e 's/  */ /g' -e 's/^ */   ncu: /' || echo "   ncu: (no line matching $theirs)"
done
exit $hand_rc
