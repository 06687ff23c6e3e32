# A_MN with 64-m boxes: more points beside the pre-pass ones, then the harness's verdict of the three-consumer point.
source .dev/common.sh
timeout 400 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --point "" --point "A_MN=1,OVERLAP=0" \
  --point "A_MN=1,BN=96" --point "A_MN=1,BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0" \
  --point "BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0" --point "A_MN=1,BM=192,CONSUMERS=3,STAGES=5,EPI=0,SPLIT_K=1,OVERLAP=0" \
  --point "A_MN=1,BM=64,CONSUMERS=1,OVERLAP=0" --point "A_MN=1,BN=256,N_PARTS=2,STAGES=3,OVERLAP=0" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B2 -A3 "correctness: [^o]" $OUT/$M-hop.txt | head -20
for P in "A_MN=1 BM=192 CONSUMERS=3 STAGES=4 SPLIT_K=1 OVERLAP=0" "A_MN=1 BN=96"; do
  args=""; for kv in $P; do args="$args --param $kv"; done
  python3 -m ksci.cli render --problem fp8_gemm --template wgmma $args -o /tmp/p.cu
  tag=$(echo $P | tr ' =' '_-')
  timeout 200 python3 -m ksci.cli evaluate --problem fp8_gemm --source /tmp/p.cu --json > $OUT/eval-$tag.json 2>/dev/null
  echo "eval $P rc $?"; python3 -c "
import json,collections; d=json.load(open('$OUT/eval-$tag.json')); print(d['status'], d['message'][:200], d.get('geomean_us'), d.get('vendor_geomean_us'), collections.Counter((x['profile'], x['ok']) for x in d['checks']))"
done
cd $OUT && tar czf hop.tgz hop eval-*.json && rm -rf hop eval-*.json
