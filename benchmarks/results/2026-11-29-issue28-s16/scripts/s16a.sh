# Call A: the K-major tuning evolution from scratch on this machine (its best timed beside cuBLASLt in call B).
source .dev/common.sh
rm -rf /tmp/tk
timeout 530 python3 benchmarks/tuning_throughput.py --label kmajor-s16 --race --overlap 1 --candidates 200 --minutes 7.2 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1
echo "rc $?"; tail -25 $OUT/$M-kmajor-run.txt
