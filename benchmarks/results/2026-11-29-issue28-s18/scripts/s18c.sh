# Call C, meant for the same machine: fp8_gemm's best beside cuBLASLt, the adversarial suite, ncu of the evolved
# K-major point at 6144x4608x7168 and its TAIL_N twin.
source .dev/common.sh
timeout 100 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s18 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "result rc $?"; tail -24 $OUT/$M-fp8gemm-evolution-result.txt
timeout 300 python3 benchmarks/adversarial.py --quick --json-out /tmp/adv.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $?"; tail -2 $OUT/$M-adversarial.txt | cut -c1-300
P0="BM=192,BN=128,CLUSTER=1,CONSUMERS=3,EPI=2,GROUP_M=8,N_PARTS=1,OVERLAP=0,PROMOTE=4,SPLIT_K=1,STAGES=4"; printf "%s\n%s\n" "$P0,TAIL_N=96" "$P0,TAIL_N=64" > /tmp/points.txt
N=$OUT/$M-ncu.txt; : > $N
while read -r P; do
  echo "== point $P" >> $N
  timeout 45 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done < /tmp/points.txt
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active" $N
