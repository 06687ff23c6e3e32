# ncu of the B_MN GEMM at 6144x4608x7168: metrics, stall reasons, source page with SASS.
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_op_ldsm.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_shared_st.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed
P="B_MN=3,STAGES=4"
timeout 150 $NCU --clock-control none -k regex:wgmma --launch-skip 2 --launch-count 1 --metrics "$MET,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm --profile 6144,4608,7168 --point "$P" --out /tmp/x > $OUT/ncu-bmn.txt 2>&1
echo "ncu rc $?"; lib=$(ls -t /tmp/hopper_fp8_cache/*/kernel.so | head -1)
grep -E "sm__cycles|gmma|inst_executed|bank_conflicts|ldsm|wavefronts|throughput|per_second" $OUT/ncu-bmn.txt
grep -E "stalled" $OUT/ncu-bmn.txt | awk '$NF+0 > 0.05'
timeout 200 $NCU --clock-control none -k regex:wgmma --launch-skip 2 --launch-count 1 --section SourceCounters -f -o /tmp/bmn \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm --profile 6144,4608,7168 --point "$P" --out /tmp/x > $OUT/ncu-src.log 2>&1
echo "src rc $?"
$NCU --import /tmp/bmn.ncu-rep --page source --csv --print-source sass > $OUT/bmn-source.csv 2>&1
cuobjdump --dump-sass $lib > $OUT/bmn.sass 2>&1
ls -la $OUT
