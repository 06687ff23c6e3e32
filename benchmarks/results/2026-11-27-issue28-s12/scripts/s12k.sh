# Diagnosis of B_MN's transposition (timing only; the variants' results are wrong on purpose): without its stmatrix
# stores (values kept alive), without stores and loads, without the proxy fence, without the loads; beside B_MN 3 and the default.
source .dev/common.sh
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "B_MN=3,STAGES=4" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop.txt
for V in nost both nofence nold; do
  timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --template-dir .dev/diag_$V --point "B_MN=3,STAGES=4" \
    --out $OUT/hop-$V > $OUT/$M-hop-$V.txt 2>&1
  echo "hopper $V rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop-$V.txt
done
cd $OUT && tar czf hop.tgz hop hop-* && rm -rf hop hop-*
