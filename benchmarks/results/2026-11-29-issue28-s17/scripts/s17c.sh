# Call C, meant for the same machine: the adversarial suite, then the GPU tests of the tuned points (TAIL_N's
# included, never run before).
source .dev/common.sh
timeout 300 python3 benchmarks/adversarial.py --quick --json-out $OUT/$M-adversarial.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $?"; tail -4 $OUT/$M-adversarial.txt
timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "tuned_point and (change2 or change6 or change1)" \
  > $OUT/$M-gpu-tests.txt 2>&1
echo "tests rc $?"; tail -8 $OUT/$M-gpu-tests.txt
P0="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2"
N=$OUT/$M-ncu-tail96.txt; echo "== point $P0,TAIL_N=96" > $N
timeout 45 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
  sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P0,TAIL_N=96" --out /tmp/x >> $N 2>&1
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active" $N
