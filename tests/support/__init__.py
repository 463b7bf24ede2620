"""Helpers that start real parts (vLLM, Prometheus, SSH) for the tests and benchmarks."""
