# Call D (diagnostic): how much of the three-consumer K loop's time is the promotion's FFMAs? The TAIL_N 96 point at
# 6144x4608x7168 under ncu with promote_kblock's chunk loop as it is (64 FFMAs a thread per K block), halved (32),
# a quarter (16; one chunk spilled) and doubled (128). Every variant but the first computes wrong results on purpose; --profile
# only runs the kernel (no check).
source .dev/common.sh
T=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
cp $T /tmp/orig.j2
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
N=$OUT/$M-ncu-promote.txt; : > $N
for V in full quarter half double full2; do
  cp /tmp/orig.j2 $T
  case $V in
    half) sed -i '709s|j < NR / 4;|j < NR / 8;|' $T ;;
    quarter) sed -i '709s|j < NR / 4;|j < NR / 16;|' $T ;;
    double) sed -i '709s|++j) {|++j) for (int rep = 0; rep < 2; ++rep) {|' $T ;;
  esac
  echo "== variant $V: $(sed -n 709p $T | sed 's/^ *//')" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
cp /tmp/orig.j2 $T
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|inst_executed|issue_active|fma_cycles|rror" $N
