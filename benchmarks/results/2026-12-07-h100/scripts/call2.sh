# GPU call 2: the sandbox against hostile host code (issue 51: four kernels, each a denied call, nothing written);
# an honest kernel under the same confinement; the adversarial kernels with held-out shapes and the syscall filter
# on (issue 52: the catch table); then the export of call 1's best (issue 54), installed offline in a fresh venv.
source .dev/gpu/common.sh
timeout 100 python3 benchmarks/sandbox_hostile.py > $OUT/sandbox-hostile.txt 2>&1; echo "sandbox_hostile rc $?"
tail -9 $OUT/sandbox-hostile.txt
timeout 45 python3 -m ksci.cli evaluate --problem rmsnorm --source kernels/rmsnorm/solutions/correct/warp_per_row.cu \
  --json > $OUT/logs/honest-rmsnorm.json 2>$OUT/logs/honest-rmsnorm.err; echo "honest rmsnorm rc $?"
python3 -c "import json;v=json.load(open('$OUT/logs/honest-rmsnorm.json'));print('honest rmsnorm:', json.dumps({k: v[k] for k in v if k in ('status','message')}), json.dumps(v.get('fingerprint',{}).get('sandbox',{}))[:700])" || tail -3 $OUT/logs/honest-rmsnorm.err
timeout 200 python3 benchmarks/adversarial.py --quick --only adversarial --json-out $OUT/logs/adv.json > $OUT/adversarial.txt 2>&1
echo "adversarial rc $?"; grep -v "^    " $OUT/adversarial.txt | tail -40
timeout 125 bash benchmarks/export_check.sh $OUT/logs/export throughput-kmajor-held .gpu-carry/store > $OUT/export.txt 2>&1
echo "export_check rc $?"; grep -v "^    " $OUT/export.txt | tail -40
