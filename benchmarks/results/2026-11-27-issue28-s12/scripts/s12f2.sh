# A tuning evolution of fp8_gemm from scratch with B_MN in the space, its best timed beside cuBLASLt.
source .dev/common.sh
rm -rf /tmp/tg
timeout 470 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s12 --race --overlap 1 --candidates 200 \
  --minutes 6.0 --keep /tmp/tg --save $OUT/$M-fp8gemm-throughput.json > $OUT/$M-fp8gemm-run.txt 2>&1
echo "rc $?"; tail -4 $OUT/$M-fp8gemm-run.txt
timeout 110 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s12 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "result rc $?"; tail -30 $OUT/$M-fp8gemm-evolution-result.txt
