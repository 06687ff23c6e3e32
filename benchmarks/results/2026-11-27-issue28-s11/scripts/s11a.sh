# A_MN (A transposed on its way into registers) for fp8_gemm: correctness and per-shape times beside cuBLASLt.
source .dev/common.sh
timeout 330 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "" --point "A_MN=1,OVERLAP=0" \
  --point "A_MN=1,OVERLAP=0,SPLIT_K=1" --point "OVERLAP=0" --point "BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0" \
  --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; tail -45 $OUT/$M-hop.txt
python3 -m ksci.cli render --problem fp8_gemm --template wgmma --param A_MN=1 --param OVERLAP=0 -o /tmp/amn.cu
timeout 200 python3 -m ksci.cli evaluate --problem fp8_gemm --source /tmp/amn.cu --json > $OUT/$M-amn-eval.json 2> $OUT/$M-amn-eval.err
echo "eval rc $?"; head -c 1500 $OUT/$M-amn-eval.json; tail -5 $OUT/$M-amn-eval.err
cd $OUT && tar czf hop.tgz hop && rm -rf hop
