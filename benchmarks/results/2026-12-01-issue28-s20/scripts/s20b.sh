# Call B (same machine): the K-major best beside cuBLASLt; fp8_gemm's tuning evolution from scratch.
source .dev/common.sh
timeout 110 python3 benchmarks/evolution_result.py --store /tmp/tk/store --run throughput-kmajor-s20 \
  --json-out $OUT/$M-kmajor-evolution-result.json > $OUT/$M-kmajor-evolution-result.txt 2>&1
echo "result rc $?"; tail -24 $OUT/$M-kmajor-evolution-result.txt
cp $OUT/$M-kmajor-evolution-result.json /tmp/er-kmajor.json 2>/dev/null
python3 .dev/points.py /tmp/er-kmajor.json > /tmp/points.txt; cat /tmp/points.txt
rm -rf /tmp/tg
timeout 400 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s20 --race --overlap 1 --deadline 330 \
  --candidates 200 --minutes 4.8 --keep /tmp/tg --save $OUT/$M-fp8gemm-throughput.json > $OUT/$M-fp8gemm-run.txt 2>&1
echo "fp8_gemm rc $?"; tail -3 $OUT/$M-fp8gemm-run.txt
