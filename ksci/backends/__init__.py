"""Where candidates are compiled and run: the real toolchains and GPUs, or the simulator."""
