# Call E (twenty-first session): EPI 2's C stores by TMA (one thread a warpgroup issues the boxes' bulk stores from a
# swizzled staging, no 16-byte loads and stores per thread) against the template before (HEAD's, .dev copy): timed
# beside cuBLASLt on the 18 shapes (checked on the test and benchmark shapes first), then ncu at 6144x4608x7168.
source .dev/common.sh
T0=$SECONDS
A="BM=192,BN=128,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
C="BM=128,BN=128,CONSUMERS=2,STAGES=5,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=64"
CORE=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
cp $CORE /tmp/core.new
N=$OUT/$M-tma-ncu.txt; : > $N
prof() {
  echo "== $1" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$2" --out /tmp/x >> $N 2>&1
}
timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-benchmarks --reps 20 --point "$A" --point "$C" \
  --out /tmp/hn > $OUT/$M-tma-table.txt 2>&1
echo "new table rc $? after $((SECONDS - T0)) s"
grep -E "correctness|geomean|6144x4608x7168|FAIL|rror|SoL" $OUT/$M-tma-table.txt | cut -c1-200 | head -20
prof "new A" "$A"
cp .dev/wgmma_core_head.cu.j2 $CORE
prof "old A" "$A"
cp /tmp/core.new $CORE
prof "new A again" "$A"
cp .dev/wgmma_core_head.cu.j2 $CORE
prof "old A again" "$A"
timeout 100 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --quick --reps 20 --point "$A" --point "$C" \
  --out /tmp/ho > $OUT/$M-old-table.txt 2>&1
echo "old table rc $? after $((SECONDS - T0)) s"
grep -E "geomean|6144x4608x7168|FAIL|rror" $OUT/$M-old-table.txt | cut -c1-200 | head -8
cp /tmp/core.new $CORE
grep -E "^==|cycles_elapsed.max|per_second|duration|tensor|inst_exec|rror" $N
echo "done after $((SECONDS - T0)) s"
