# Call C (same machine): fp8_gemm's best beside cuBLASLt; the adversarial suite; if time is left, ncu of the K-major
# best's point at 6144x4608x7168.
source .dev/common.sh
T0=$SECONDS
timeout 100 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s20 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "result rc $?"; tail -4 $OUT/$M-fp8gemm-evolution-result.txt
timeout 330 python3 benchmarks/adversarial.py --quick --json-out /tmp/adv.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $? after $((SECONDS - T0)) s"; tail -2 $OUT/$M-adversarial.txt | cut -c1-400
if [ $((SECONDS - T0)) -lt 420 ]; then
  N=$OUT/$M-ncu.txt
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$(head -1 /tmp/points.txt)" --out /tmp/x > $N 2>&1
  grep -E "cycles_elapsed.max|per_second|duration|tensor|rror" $N
fi
