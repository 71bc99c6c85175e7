r"""Benchmark suites of :mod:`apnet_pyg` (not part of the installed package).

Run ``python -m benchmarks [SUITE] [--device cpu|cuda] [--quick]``; see
``benchmarks/README.md``.
"""
