"""One line per candidate of a run's lineage (generation, proposer, status, geomean, the time on one shape, the
parameters, the hypothesis), as CSV; then which candidates had TAIL_N 96 with three consumers."""

import json
import sys

import pandas as pd

from ksci.lineage.store import LineageStore, shape_times

store, run = sys.argv[1], sys.argv[2]
shape = sys.argv[3] if len(sys.argv) > 3 else "6144x4608x7168"
frame = LineageStore(store).read(run)
rows = []
for _, r in frame.sort_values(["generation", "candidate_id"]).iterrows():
    times = shape_times(r.get("shape_times_json"))
    params = r["params_json"] if isinstance(r["params_json"], str) else "composed"
    rows.append(
        dict(
            gen=r["generation"],
            id=r["candidate_id"][:8],
            status=r["status"],
            geomean=r["geomean_us"],
            shape_us=times.get(shape),
            params=params,
            hypothesis=str(r.get("hypothesis"))[:200],
            shape_times=json.dumps(times, sort_keys=True),  # every shape's time, for offline replays
        )
    )
out = pd.DataFrame(rows)
out.to_csv(sys.stdout, index=False)
t96 = [x for x in rows if '"TAIL_N": 96' in x["params"] and '"CONSUMERS": 3' in x["params"]]
print(f"# {len(rows)} candidates; {len(t96)} with CONSUMERS 3 and TAIL_N 96", file=sys.stderr)
