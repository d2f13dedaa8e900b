"""Benchmarks of webtier against the book's listings (``webtier bench``).

:mod:`webtier.bench.cli` has the click group; :mod:`webtier.bench.book` the
book's functions ported as baselines; one module per benchmark
(:mod:`webtier.bench.counters`) on a shared harness
(:mod:`webtier.bench._harness`). See docs/benchmarks.md.
"""
