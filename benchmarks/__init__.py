"""Throughput and scaling benchmarks (not run as tests): ``python -m benchmarks.<name>``."""
