# Call 0 (twentieth session): where a check's and a timed call's milliseconds go (benchmarks/check_cost.py), and the
# harness child's phases under cProfile (benchmarks/harness_profile.py), on today's harness; the machine's clocks.
source .dev/common.sh
nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE > $OUT/$M-smi-q.txt 2>&1
timeout 200 python3 benchmarks/check_cost.py --reps 3 > $OUT/$M-check-cost.txt 2>&1
echo "check_cost rc $?"
timeout 200 python3 benchmarks/harness_profile.py > $OUT/$M-harness-profile.txt 2>&1
echo "harness_profile rc $?"
grep -E "^====|calls .* checked" $OUT/$M-harness-profile.txt | head -60
