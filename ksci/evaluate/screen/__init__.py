"""The static screen of a kernel source (before it compiles) and the check of its built library (before it loads)."""
