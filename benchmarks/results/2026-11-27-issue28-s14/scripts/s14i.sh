# Call 9, same machine: call 8's best beside cuBLASLt; then fp8_gemm's tuning evolution from scratch.
source .dev/common.sh
timeout 100 python3 benchmarks/evolution_result.py --store /tmp/tk/store --run throughput-kmajor-s14 \
  --json-out $OUT/$M-kmajor-evolution-result.json > $OUT/$M-kmajor-evolution-result.txt 2>&1
echo "result rc $?"; tail -30 $OUT/$M-kmajor-evolution-result.txt
rm -rf /tmp/tg
timeout 270 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s14 --race --overlap 1 --candidates 200 \
  --minutes 3.6 --keep /tmp/tg --save $OUT/$M-fp8gemm-throughput.json > $OUT/$M-fp8gemm-run.txt 2>&1
echo "fp8_gemm rc $?"; tail -3 $OUT/$M-fp8gemm-run.txt
