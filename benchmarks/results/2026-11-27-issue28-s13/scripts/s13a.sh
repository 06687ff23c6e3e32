# FUSE (the pre-pass inside the GEMM): correctness on every test and benchmark shape, then times beside cuBLASLt.
source .dev/common.sh
P1="FUSE=2"; P2="FUSE=4,STAGES=4"; P3="A_MN=0,OVERLAP=1,FUSE=2"; P4="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,A_MN=0,FUSE=1"
P5="A_MN=0,CLUSTER=2,BN=96,STAGES=4,FUSE=2"
timeout 240 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --check-only --check-benchmarks --point "$P1" --point "$P3" \
  --point "$P4" --point "$P5" --out $OUT/chk > $OUT/$M-chk.txt 2>&1
echo "check rc $?"; grep -E "correctness|compiled|rror" $OUT/$M-chk.txt | head -20
if grep -q "correctness: ok" $OUT/$M-chk.txt; then
timeout 330 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "$P1" --point "$P2" \
  --point "A_MN=0,OVERLAP=1" --point "$P3" --point "BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,A_MN=0" --point "$P4" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B2 -A3 "correctness: [^o]" $OUT/$M-hop.txt | head -20
fi
cd $OUT && tar czf hop.tgz hop chk 2>/dev/null; rm -rf hop chk
