# Call A: fp8_gemm_kmajor's tuning evolution from scratch, then its best timed again beside cuBLASLt (same process,
# same machine), and the best's 6144x4608x7168 point written out for call B's ncu.
source .dev/common.sh
rm -rf /tmp/tk
timeout 470 python3 benchmarks/tuning_throughput.py --label kmajor-s17 --race --overlap 1 --candidates 200 --minutes 6.8 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1
echo "run rc $?"; tail -3 $OUT/$M-kmajor-run.txt
timeout 110 python3 benchmarks/evolution_result.py --store /tmp/tk/store --run throughput-kmajor-s17 \
  --json-out $OUT/$M-kmajor-evolution-result.json > $OUT/$M-kmajor-evolution-result.txt 2>&1
echo "result rc $?"; tail -32 $OUT/$M-kmajor-evolution-result.txt
cp $OUT/$M-kmajor-evolution-result.json /tmp/er-kmajor.json 2>/dev/null
python3 .dev/points.py /tmp/er-kmajor.json > /tmp/points.txt; cat /tmp/points.txt
