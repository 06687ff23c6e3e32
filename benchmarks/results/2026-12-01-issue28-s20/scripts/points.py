"""Print the evolved best's point on one shape (as hopper_fp8 --point text), then its A/B twin (TAIL_N toggled)."""

import json
import sys

record = json.load(open(sys.argv[1]))
shape = sys.argv[2] if len(sys.argv) > 2 else "6144x4608x7168"
plan = record["evolved"]["plan"]
if plan is None:
    sys.exit("not composed")
default = plan["default"]
change = plan["shapes"].get(shape, {})
if "template" in change and "params" in change:
    template, params = change["template"], change["params"]
else:
    template, params = default["template"], {**default["params"], **change}
if "wgmma" not in template:
    sys.exit(f"template {template}")
twin = dict(params)
if params.get("TAIL_N", 0):
    twin["TAIL_N"] = 0
elif params.get("EPI") == 2 and (params.get("CONSUMERS", 2) < 3 or params.get("CLUSTER", 1) == 1):
    twin["TAIL_N"] = 96 if params.get("BN", 0) > 96 else 64 if params.get("BN", 0) > 64 else 0
    twin = twin if twin["TAIL_N"] else None
else:
    twin = None
print(",".join(f"{k}={v}" for k, v in sorted(params.items())))
if twin:
    print(",".join(f"{k}={v}" for k, v in sorted(twin.items())))
