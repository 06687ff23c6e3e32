"""Evaluation of one kernel source: screen, hipify, compile, library check, verify, time, classify."""
