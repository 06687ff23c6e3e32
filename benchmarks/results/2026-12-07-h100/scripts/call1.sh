# GPU call 1: a tuning evolution of fp8_gemm_kmajor with default settings (race on, overlap 1), at least 150
# candidates, held-out shapes on in every verification; then its best verified on 20 held-out shapes drawn outside
# it. The store comes back (for the export check of call 2). Also a probe of seccomp/user namespaces on this host.
source .dev/gpu/common.sh
python3 -c "import asyncpg, prefect.server.api.server" || echo "prefect server does not import"
rm -rf /tmp/tk
timeout 470 python3 benchmarks/tuning_throughput.py --label kmajor-held --race --overlap 1 --candidates 160 --minutes 6.8 \
  --deadline 450 --keep /tmp/tk --save $OUT/logs/throughput.json > $OUT/logs/run.txt 2>&1 &
RUN=$!
sleep 140
python3 - <<'PY' || { echo "watchdog: no ok candidate, stopping"; kill -TERM $RUN; }
import sys
from ksci.lineage.store import LineageStore
try:
    f = LineageStore("/tmp/tk/store").read("throughput-kmajor-held")
except Exception as e:
    print("watchdog: store not readable yet:", e); sys.exit(0)
print("watchdog:", f["status"].value_counts().to_dict())
sys.exit(0 if (f["status"] == "ok").any() or len(f) == 0 else 1)
PY
wait $RUN; echo "run rc $?"
tail -6 $OUT/logs/run.txt
python3 - <<'PY' | tee $OUT/verdicts.txt
from ksci.lineage.store import LineageStore
f = LineageStore("/tmp/tk/store").read("throughput-kmajor-held")
print("candidates", len(f), "verdicts", f["status"].value_counts().to_dict())
for _, r in f[f["status"] != "ok"].head(12).iterrows():
    print(" ", r["status"], str(r.get("message", r.get("error", "")))[:300])
PY
timeout 90 python3 benchmarks/held_out_best.py --run throughput-kmajor-held --store /tmp/tk/store --held-out 20 \
  > $OUT/held-out-best.txt 2>&1; echo "held_out_best rc $?"; tail -8 $OUT/held-out-best.txt
tar czf $OUT/store.tgz -C /tmp/tk store
