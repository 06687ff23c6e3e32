# Call 8: the K-major tuning evolution from scratch on this machine (its best timed beside cuBLASLt in call 9).
source .dev/common.sh
rm -rf /tmp/tk
timeout 545 python3 benchmarks/tuning_throughput.py --label kmajor-s14 --race --overlap 1 --candidates 200 --minutes 7.6 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1
echo "rc $?"; tail -3 $OUT/$M-kmajor-run.txt
