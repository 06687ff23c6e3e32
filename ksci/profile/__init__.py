"""What the hardware says about one kernel: a profiler (Nsight Compute on CUDA, rocprofv3 on ROCm) run on one shape,
its CSV parsed into a typed record (result.py), told to the LLM as a short digest (digest.py), never the raw report.

ncu.py and rocprof.py each build their tool's command and parse its output; run.py runs either on a compiled
candidate (runner.py is the tiny program the profiler watches) and turns every failure (no profiler, no permission
to read the counters, a timeout) into a value; stage.py compiles a source and picks the shape (`ksci profile`,
tasks/profile.py); standing.py is the per-shape standing and the resource report, view.py what the prompts get,
store.py the profiles a run keeps.
"""
