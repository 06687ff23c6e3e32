# Call 8: ncu of the evolved kernel's point for 6144x4608x7168 (three consumers) and of cuBLASLt's kernel, same process.
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex.sum,smsp__inst_executed.sum,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0"
timeout 200 $NCU --clock-control none -k regex:"wgmma|nvjet" --launch-skip 2 --launch-count 2 \
  --metrics "$MET,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --profile-vendor --point "$P" \
  --out /tmp/x > $OUT/$M-ncu-kmajor-c3.txt 2>&1
echo "ncu rc $?"
grep -E "^  [a-z_]+.*(wgmma|nvjet)|cycles_elapsed|per_second|duration|cycles_active|gmma|throughput|sectors|inst_executed|bank_" $OUT/$M-ncu-kmajor-c3.txt | head -40
grep -E "stalled" $OUT/$M-ncu-kmajor-c3.txt | awk '$NF+0 > 0.1'
