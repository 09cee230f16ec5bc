"""Benchmarks: they print their figures and write them to ``bench/results/``; not tests."""
