# EPI 2 against EPI 1 at 6144x4608x7168 under ncu (cycles, instructions, stalls), then the timing in reversed order.
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0"
for E in 1 2; do
timeout 150 $NCU --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 2 \
  --metrics "$MET,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$C3,EPI=$E" \
  --out /tmp/x > $OUT/$M-ncu-epi$E.txt 2>&1
echo "ncu EPI $E rc $?"
grep -E "cycles_elapsed|per_second|duration|inst_executed|bank_|throughput" $OUT/$M-ncu-epi$E.txt | head -20
grep -E "stalled" $OUT/$M-ncu-epi$E.txt | awk '$NF+0 > 0.1' | head -24
done
C2="OVERLAP=0,SPLIT_K=1"
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 30 --point "$C3,EPI=2" --point "$C3,EPI=1" \
  --point "$C2,EPI=2" --point "$C2,EPI=1" --out $OUT/hop > $OUT/$M-hop2.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop2.txt
cd $OUT && tar czf hop2.tgz hop 2>/dev/null; rm -rf hop
