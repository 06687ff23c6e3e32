# Calls 1 and 2 (twenty-first session): EPI 2's C staging in 32-column passes, so that STAGES 5 fits with three
# consumers (and 6 with two). Timed beside cuBLASLt on the 18 shapes (checked on the test and benchmark shapes first),
# then ncu at 6144x4608x7168: the best point known (STAGES 4, whole-tile staging), STAGES 5 (passes), and STAGES 4
# with the passes forced (what the passes cost alone; the template edited after the table). Run against a working
# tree with the passes patch (not committed: it lost); call 2 re-ran the ncu part (SKIP_TABLE=1) after call 1 stopped
# on an unset variable.
source .dev/common.sh
T0=$SECONDS
A="BM=192,BN=128,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
B="BM=192,BN=128,CONSUMERS=3,STAGES=5,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
C="BM=128,BN=128,CONSUMERS=2,STAGES=5,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=64"
D="BM=128,BN=128,CONSUMERS=2,STAGES=6,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=64"
[ -n "${SKIP_TABLE:-}" ] || timeout 240 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-benchmarks --reps 20 --point "$A" --point "$B" \
  --point "$C" --point "$D" --out /tmp/hf > $OUT/$M-stages-table.txt 2>&1
echo "table rc $? after $((SECONDS - T0)) s"
grep -E "correctness|geomean|6144x4608x7168|FAIL|rror|SoL" $OUT/$M-stages-table.txt | cut -c1-200 | head -30
N=$OUT/$M-stages-ncu.txt; : > $N
prof() {
  echo "== $1" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$2" --out /tmp/x >> $N 2>&1
}
prof "A stages 4" "$A"
prof "B stages 5 passes" "$B"
prof "A again" "$A"
prof "B again" "$B"
cp kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2 /tmp/core.bak
sed -i 's/RING_BYTES + BM \* (2 \* BN + 16) > 225 \* 1024 ? 32 : BN/true ? 32 : BN/' kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
grep -n "constexpr int EPI_COLS" kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2 >> $N
prof "A with passes forced" "$A"
cp /tmp/core.bak kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
grep -E "^==|cycles_elapsed.max|per_second|duration|tensor|inst_exec|rror" $N
echo "done after $((SECONDS - T0)) s"
