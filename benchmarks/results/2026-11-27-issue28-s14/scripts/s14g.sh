# fp8_gemm with EPI 2 (A_MN 0: both operands through the pre-pass): check on every shape, then times beside EPI 1.
source .dev/common.sh
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,A_MN=0"
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --check-only --check-benchmarks \
  --point "$C3,EPI=2" --point "A_MN=0,SPLIT_K=1,EPI=2" --out $OUT/chk > $OUT/$M-chk-fp8gemm.txt 2>&1
echo "check rc $?"; grep -E "correctness" $OUT/$M-chk-fp8gemm.txt | head
if ! grep -q "correctness: [^o]" $OUT/$M-chk-fp8gemm.txt; then
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "$C3,EPI=1" --point "$C3,EPI=2" \
  --point "A_MN=0,SPLIT_K=1,EPI=1" --point "A_MN=0,SPLIT_K=1,EPI=2" --out $OUT/hop > $OUT/$M-hop-fp8gemm.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop-fp8gemm.txt
fi
cd $OUT && tar czf fp8gemm.tgz hop chk 2>/dev/null; rm -rf hop chk
