# Call B, same machine: call A's best beside cuBLASLt; ncu of its 6144x4608x7168 point with and without TAIL_N;
# the adversarial suite.
source .dev/common.sh
timeout 110 python3 benchmarks/evolution_result.py --store /tmp/tk/store --run throughput-kmajor-s16 \
  --json-out $OUT/$M-kmajor-evolution-result.json > $OUT/$M-kmajor-evolution-result.txt 2>&1
echo "result rc $?"; tail -32 $OUT/$M-kmajor-evolution-result.txt
python3 .dev/points.py $OUT/$M-kmajor-evolution-result.json > /tmp/points.txt; cat /tmp/points.txt
N=$OUT/$M-ncu.txt; : > $N
for rep in 1 2; do while read -r P; do
  echo "== rep $rep point $P" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done < /tmp/points.txt; done
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|inst_executed" $N | tail -30
timeout 290 python3 benchmarks/adversarial.py --quick --json-out $OUT/$M-adversarial.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $?"; tail -40 $OUT/$M-adversarial.txt
