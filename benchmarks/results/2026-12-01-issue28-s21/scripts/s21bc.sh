# Call B+C (same machine, twenty-first session): the K-major best beside cuBLASLt; the adversarial suite; fp8_gemm's
# tuning evolution from scratch (a short one: the session's device time) and its best beside cuBLASLt.
source .dev/common.sh
T0=$SECONDS
timeout 90 python3 benchmarks/evolution_result.py --store /tmp/tk/store --run throughput-kmajor-s21 \
  --json-out $OUT/$M-kmajor-evolution-result.json > $OUT/$M-kmajor-evolution-result.txt 2>&1
echo "result rc $? after $((SECONDS - T0)) s"; tail -24 $OUT/$M-kmajor-evolution-result.txt
cp $OUT/$M-kmajor-evolution-result.json /tmp/er-kmajor.json 2>/dev/null
python3 .dev/points.py /tmp/er-kmajor.json > /tmp/points.txt; cat /tmp/points.txt
timeout 240 python3 benchmarks/adversarial.py --quick --json-out /tmp/adv.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $? after $((SECONDS - T0)) s"; tail -2 $OUT/$M-adversarial.txt | cut -c1-400
rm -rf /tmp/tg
timeout 180 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s21 --race --overlap 1 --deadline 130 \
  --candidates 200 --minutes 2.1 --keep /tmp/tg --save $OUT/$M-fp8gemm-throughput.json > $OUT/$M-fp8gemm-run.txt 2>&1
echo "fp8_gemm rc $? after $((SECONDS - T0)) s"; tail -3 $OUT/$M-fp8gemm-run.txt
timeout 80 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s21 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "fp8 result rc $? after $((SECONDS - T0)) s"; tail -4 $OUT/$M-fp8gemm-evolution-result.txt
