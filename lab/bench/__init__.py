"""Benchmarks: speed, memory and the measurements behind docs/benchmarks.md (run each script with -h)."""
