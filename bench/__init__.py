"""Benchmarks: each a command that writes a results file (table and plot) under bench/results."""
