# B_MN (B transposed in shared memory by producer warps, no pre-pass): correctness first, then times beside cuBLASLt.
source .dev/common.sh
timeout 120 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --quick --check-only --point "B_MN=1,STAGES=3" \
  --out $OUT/chk > $OUT/$M-chk.txt 2>&1
echo "check rc $?"; grep -E "correctness|compiled" $OUT/$M-chk.txt | head
if grep -q "correctness: ok" $OUT/$M-chk.txt; then
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "B_MN=1,STAGES=3" \
  --point "B_MN=1,STAGES=4,EPI=0" --point "B_MN=1,STAGES=3,SPLIT_K=1" --point "B_MN=1,BN=64,STAGES=5" \
  --point "B_MN=1,BN=192,N_PARTS=2,STAGES=3,EPI=0" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B2 -A3 "correctness: [^o]" $OUT/$M-hop.txt | head -20
python3 -m ksci.cli render --problem fp8_gemm --template wgmma --param B_MN=1 --param STAGES=3 -o /tmp/p.cu
timeout 150 python3 -m ksci.cli evaluate --problem fp8_gemm --source /tmp/p.cu --json > $OUT/eval-bmn.json 2>/dev/null
echo "eval rc $?"; python3 -c "
import json,collections; d=json.load(open('$OUT/eval-bmn.json')); print(d['status'], d['message'][:200], d.get('geomean_us'), d.get('vendor_geomean_us'), collections.Counter((x['profile'], x['ok']) for x in d['checks']))"
fi
cd $OUT && tar czf hop.tgz hop chk eval-*.json 2>/dev/null; rm -rf hop chk eval-*.json
