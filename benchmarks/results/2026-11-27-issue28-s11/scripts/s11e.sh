# SWAP (C^T = B A^T, B read as it is): correctness and times beside cuBLASLt and the A_MN default; harness verdict.
source .dev/common.sh
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --point "" --point "SWAP=1" \
  --point "SWAP=1,SPLIT_K=1" --point "SWAP=1,BN=96" --point "SWAP=1,BM=64,CONSUMERS=1" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B3 -A6 "correctness: [^o]" $OUT/$M-hop.txt | head -30
python3 -m ksci.cli render --problem fp8_gemm --template wgmma --param SWAP=1 -o /tmp/p.cu
timeout 200 python3 -m ksci.cli evaluate --problem fp8_gemm --source /tmp/p.cu --json > $OUT/eval-swap.json 2>/dev/null
echo "eval rc $?"; python3 -c "
import json,collections; d=json.load(open('$OUT/eval-swap.json')); print(d['status'], d['message'][:300], d.get('geomean_us'), d.get('vendor_geomean_us'), collections.Counter((x['profile'], x['ok']) for x in d['checks']))"
cd $OUT && tar czf hop.tgz hop eval-*.json && rm -rf hop eval-*.json
