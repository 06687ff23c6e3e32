"""Importers of problems written in other projects' formats: KernelBench (kernelbench.py) and gpu-mode's
reference-kernels (gpumode.py). Each writes a problem folder that ksci/problem/spec.py loads like a shipped one."""
