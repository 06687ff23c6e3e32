# The same tuning evolution of fp8_gemm on an H100 (the goal on the other card), best's points printed, store kept.
source .dev/common.sh
rm -rf /tmp/tg
timeout 470 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s12c --race --overlap 1 --candidates 200 \
  --minutes 6.0 --keep /tmp/tg --save $OUT/$M-fp8gemm-c-throughput.json > $OUT/$M-fp8gemm-c-run.txt 2>&1
echo "rc $?"; tail -4 $OUT/$M-fp8gemm-c-run.txt
timeout 110 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s12c \
  --json-out $OUT/$M-fp8gemm-c-evolution-result.json > $OUT/$M-fp8gemm-c-evolution-result.txt 2>&1
echo "result rc $?"; tail -30 $OUT/$M-fp8gemm-c-evolution-result.txt
cd /tmp/tg && tar czf $OUT/store-s12c.tgz store && ls -la $OUT
