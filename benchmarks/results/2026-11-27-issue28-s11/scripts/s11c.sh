# A_MN with the next K block's fragments prefetched: A/B against no prefetch (same machine), more points.
source .dev/common.sh
timeout 250 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --point "" --point "A_MN=1,OVERLAP=0" \
  --point "A_MN=1,OVERLAP=0,SPLIT_K=1" --point "BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0" \
  --point "A_MN=1,OVERLAP=0,CLUSTER=2" --point "A_MN=1,OVERLAP=0,GROUP_M=16" \
  --point "A_MN=1,BM=64,CONSUMERS=1,OVERLAP=0" --point "A_MN=1,OVERLAP=0,EPI=0,STAGES=6" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B2 -A3 "correctness: [^o]" $OUT/$M-hop.txt | head -20
timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --template-dir .dev/noprefetch --point "A_MN=1,OVERLAP=0" \
  --out $OUT/hop-noprefetch > $OUT/$M-hop-noprefetch.txt 2>&1
echo "hopper noprefetch rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop-noprefetch.txt
python3 -m ksci.cli render --problem fp8_gemm --template wgmma --param A_MN=1 --param OVERLAP=0 -o /tmp/p.cu
timeout 200 python3 -m ksci.cli evaluate --problem fp8_gemm --source /tmp/p.cu --json > $OUT/eval-amn.json 2>/dev/null
echo "eval rc $?"; python3 -c "
import json,collections; d=json.load(open('$OUT/eval-amn.json')); print(d['status'], d['message'][:200], d.get('geomean_us'), d.get('vendor_geomean_us'), collections.Counter((x['profile'], x['ok']) for x in d['checks']))"
cd $OUT && tar czf hop.tgz hop hop-noprefetch eval-*.json && rm -rf hop hop-noprefetch eval-*.json
