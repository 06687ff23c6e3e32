# Call A (next session): fp8_gemm_kmajor's tuning evolution from scratch (at most 200 candidates) with the composition
# rule of 4655532; a run overshoots --minutes by up to about 50 s (the generations running finish): --deadline stops
# it at 510 s and still writes the table.
source .dev/common.sh
rm -rf /tmp/tk
timeout 575 python3 benchmarks/tuning_throughput.py --label kmajor-s19 --race --overlap 1 --candidates 200 --minutes 7.6 --deadline 510 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1
echo "run rc $?"; tail -3 $OUT/$M-kmajor-run.txt
python3 .dev/lineage_summary.py /tmp/tk/store throughput-kmajor-s19 > $OUT/$M-kmajor-lineage.csv
