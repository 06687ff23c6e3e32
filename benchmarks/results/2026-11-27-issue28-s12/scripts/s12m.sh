# Experiment: B_MN's stores as st.async (async proxy, counted by the full barrier; 8 bytes a lane after a shuffle),
# beside the committed B_MN 3 (stmatrix) and the default, on one machine; correctness checked by hopper_fp8.py.
source .dev/common.sh
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "B_MN=3,STAGES=4" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop.txt
timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --template-dir .dev/diag_stasync --point "B_MN=3,STAGES=4" \
  --out $OUT/hop-stasync > $OUT/$M-hop-stasync.txt 2>&1
echo "hopper stasync rc $?"; grep -E "correctness" $OUT/$M-hop-stasync.txt | head -3; grep -A30 "^== fp8_gemm" $OUT/$M-hop-stasync.txt
cd $OUT && tar czf hop.tgz hop hop-* && rm -rf hop hop-*
