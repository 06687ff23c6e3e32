# Call A: fp8_gemm_kmajor's tuning evolution from scratch (at most 200 candidates), its lineage summarised (which
# points ran at 6144x4608x7168); call B times the best again beside cuBLASLt on the same machine.
source .dev/common.sh
rm -rf /tmp/tk
timeout 530 python3 benchmarks/tuning_throughput.py --label kmajor-s18 --race --overlap 1 --candidates 200 --minutes 8.4 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1
echo "run rc $?"; tail -3 $OUT/$M-kmajor-run.txt
python3 .dev/lineage_summary.py /tmp/tk/store throughput-kmajor-s18 > $OUT/$M-kmajor-lineage.csv
sort -t, -k5 -g $OUT/$M-kmajor-lineage.csv 2>/dev/null | head -3 | cut -c1-400
