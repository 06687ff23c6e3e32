# Call A (twenty-first session): fp8_gemm_kmajor's tuning evolution from scratch (at most 200 candidates), each
# candidate verified and timed in one harness process (verify_and_benchmark). A watchdog stops the run if no
# candidate is ok after 150 s (the new GPU step's first run on a GPU). nvidia-smi samples clocks and power.
source .dev/common.sh
nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE > /tmp/smi-q.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 1000 > /tmp/smi-a.csv 2>&1 &
SMI=$!
rm -rf /tmp/tk
timeout 370 python3 benchmarks/tuning_throughput.py --label kmajor-s21 --race --overlap 1 --candidates 200 --minutes 4.9 --deadline 300 \
  --keep /tmp/tk --save $OUT/$M-kmajor-throughput.json > $OUT/$M-kmajor-run.txt 2>&1 &
RUN=$!
sleep 150
python3 - <<'PY' || { echo "watchdog: no ok candidate, stopping"; kill -TERM $RUN; }
import sys, glob
from ksci.lineage.store import LineageStore
try:
    f = LineageStore("/tmp/tk/store").read("throughput-kmajor-s21")
except Exception as e:
    print("watchdog: store not readable yet:", e); sys.exit(0)
print("watchdog:", f["status"].value_counts().to_dict())
sys.exit(0 if (f["status"] == "ok").any() or len(f) == 0 else 1)
PY
wait $RUN; echo "run rc $?"; kill $SMI
tail -4 $OUT/$M-kmajor-run.txt
python3 .dev/lineage_summary.py /tmp/tk/store throughput-kmajor-s21 > $OUT/$M-kmajor-lineage.csv
tail -3 $OUT/$M-kmajor-lineage.csv
tar czf $OUT/$M-smi.tgz -C /tmp smi-q.txt smi-a.csv
awk -F', ' 'NR>1 && $4+0>300 {n++; c+=$2; p+=$4} END {if (n) printf "smi under load: %d samples, SM clock %.0f MHz, power %.0f W\n", n, c/n, p/n}' /tmp/smi-a.csv
