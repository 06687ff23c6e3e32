# Diagnosis of B_MN's stores (timing only; the variant's results are wrong on purpose): the same stmatrix into a scratch
# tile that no wgmma reads, against the committed kernel and the default, B_MN 2 (room for the scratch tile).
source .dev/common.sh
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "B_MN=2,STAGES=4" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop.txt
timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --template-dir .dev/diag_scratch --point "B_MN=2,STAGES=4" \
  --out $OUT/hop-scratch > $OUT/$M-hop-scratch.txt 2>&1
echo "hopper scratch rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop-scratch.txt
cd $OUT && tar czf hop.tgz hop hop-* && rm -rf hop hop-*
