"""Evaluation of one kernel source: screen, hipify, compile, library check, verify, time, classify.

stage_order.py orders the stages (evaluate_source); host_stages.py holds them on this host's toolchains and GPUs.
By what each part does: screen/ (the source, then the built library), toolchain/ (hipify, compile), sandbox/ (the
confinement of a compile and of the harness child), run/ (the harness child's process, on the parent's side),
harness/ (the code that runs in the child), judge/ (the report's schema, the timing rules, the verdict).
"""
