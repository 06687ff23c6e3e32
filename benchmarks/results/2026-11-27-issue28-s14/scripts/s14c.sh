# EPI 2 restructured (the tile body a lambda, the epilogue's lane address recomputed in it): check, ncu, times.
source .dev/common.sh
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0"
C2="OVERLAP=0,SPLIT_K=1"
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-only --check-benchmarks \
  --point "$C3,EPI=2" --point "$C2,EPI=2" --point "$C3,EPI=2,CLUSTER=2" --out $OUT/chk > $OUT/$M-chk.txt 2>&1
echo "check rc $?"; grep -E "correctness" $OUT/$M-chk.txt | head -20
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,smsp__inst_executed.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed
for E in 1 2; do
timeout 150 $NCU --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 2 \
  --metrics "$MET,regex:smsp__average_warps_issue_stalled_(barrier|wait|dispatch_stall|gmma|long_scoreboard)_per_issue_active\.ratio" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$C3,EPI=$E" \
  --out /tmp/x > $OUT/$M-ncu-epi$E.txt 2>&1
echo "ncu EPI $E rc $?"
grep -E "cycles_elapsed|per_second|duration|inst_executed|throughput|stalled" $OUT/$M-ncu-epi$E.txt | awk '{print $1, $NF}' | head -20
done
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 30 --point "$C3,EPI=2" --point "$C3,EPI=1" \
  --point "$C2,EPI=2" --point "$C2,EPI=1" --out $OUT/hop > $OUT/$M-hop3.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop3.txt
cd $OUT && tar czf hop3.tgz hop chk 2>/dev/null; rm -rf hop chk
