"""Building a candidate: the two toolchains, CUDA to HIP (hipify), the cached compile, the SASS edit of FFMA runs."""
