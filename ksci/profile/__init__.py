"""What the hardware says about one kernel: a profiler (Nsight Compute on CUDA, rocprofv3 on ROCm) run on one shape,
its CSV parsed into a typed record (record.py), told to the LLM as a short digest (digest.py), never the raw report.

tools.py builds each profiler's command and parses its output by one code path; run.py runs it on a compiled
candidate (runner.py is the tiny program the profiler watches) and turns every failure (no profiler, no permission
to read the counters, a timeout) into a value; standing.py is the per-shape standing and the resource report.
"""
