# FUSE ablations (timing only; nowait and nostore give wrong results on purpose): where its time goes.
source .dev/common.sh
for v in cur nofence nosleep nowait nostore; do
  td=""; [ $v != cur ] && td="--template-dir .dev/fz_$v"
  timeout 100 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 10 --point "FUSE=2" --point "A_MN=0,OVERLAP=1,FUSE=2" $td \
    --out $OUT/hop_$v > $OUT/$M-hop-$v.txt 2>&1
  echo "== $v rc $?"; grep -E "6144x 4608|1024x 1536|1024x 4608|geomean" $OUT/$M-hop-$v.txt
done
cd $OUT && tar czf abl.tgz hop_* $M-hop-*.txt 2>/dev/null; rm -rf hop_* $M-hop-*.txt
