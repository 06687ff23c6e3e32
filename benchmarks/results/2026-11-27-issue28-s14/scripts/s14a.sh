# EPI 2 (epilogue under the next tile's first K block): correctness on every test and benchmark shape, then times.
source .dev/common.sh
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0"
C2="OVERLAP=0,SPLIT_K=1"
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-only --check-benchmarks \
  --point "$C3,EPI=2" --point "$C2,EPI=2" --point "$C3,EPI=2,CLUSTER=2" --out $OUT/chk > $OUT/$M-chk.txt 2>&1
echo "check rc $?"; grep -E "correctness|compiled|rror" $OUT/$M-chk.txt | head -20
if grep -q "correctness: ok" $OUT/$M-chk.txt && ! grep -q "correctness: [^o]" $OUT/$M-chk.txt; then
timeout 330 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 20 --point "$C3,EPI=1" --point "$C3,EPI=2" \
  --point "$C2,EPI=1" --point "$C2,EPI=2" --point "" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B2 -A3 "correctness: [^o]" $OUT/$M-hop.txt | head -20
fi
cd $OUT && tar czf hop.tgz hop chk 2>/dev/null; rm -rf hop chk
