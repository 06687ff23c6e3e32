# Call G (diagnostic, another H200): is the load pipeline's floor set by the stages in flight (Little's law) or by bandwidth? The
# three-consumer EPI 2 point at 6144x4608x7168 under ncu, without its wgmmas (the promotion reads acc instead of t,
# so ptxas drops the wgmmas whose results are unused: results wrong on purpose) at STAGES 4 and 3, and the kernel
# itself at STAGES 3.
source .dev/common.sh
T=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
cp $T /tmp/o.j2
N=$OUT/$M-ncu-stages.txt; : > $N
for R in "nomma 4" "nomma 3" "kernel 3"; do
  set -- $R
  cp /tmp/o.j2 $T
  [ $1 = nomma ] && sed -i '713,716s/fmaf(t\[ms\]\[/fmaf(acc[ms][/' $T
  P="BM=192,CONSUMERS=3,STAGES=$2,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
  echo "== $1 $P" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
cp /tmp/o.j2 $T
grep -E "==|sm__|gpc|duration|tensor|lts|l1tex|rror" $N
