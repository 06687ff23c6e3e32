# Call C: TAIL_N's evidence again (the fifteenth session's outputs were lost): ncu A/B at 6144x4608x7168,
# check-only of four TAIL_N points on every test and benchmark shape, then a short timing beside cuBLASLt.
source .dev/common.sh
P0="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2"
N=$OUT/$M-ncu-tail.txt; : > $N
for P in "$P0" "$P0,TAIL_N=96"; do
  echo "== point $P" >> $N
  timeout 45 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|inst_executed" $N
timeout 90 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-only --check-benchmarks \
  --point "$P0,TAIL_N=96" --point "$P0,TAIL_N=64" --point "EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=96" \
  --point "EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=64,CLUSTER=2" --out /tmp/hopc > $OUT/$M-check-tail.txt 2>&1
echo "check rc $?"; tail -15 $OUT/$M-check-tail.txt
timeout 60 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 20 --point "$P0" --point "$P0,TAIL_N=96" \
  --out /tmp/hopt > $OUT/$M-time-tail.txt 2>&1
echo "time rc $?"; tail -32 $OUT/$M-time-tail.txt
tar czf $OUT/$M-hop.tgz -C /tmp hopc hopt 2>/dev/null
