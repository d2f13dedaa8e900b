"""Benchmarks of webtier against the book's listings (``webtier bench``).

Tooling of the repository, not part of the wheel: ``webtier bench`` finds
this package beside ``src/`` when webtier is installed from a checkout
(``pip install -e '.[test]'``; see :mod:`webtier.cli.bench`).

:mod:`benchmarks.cli` has the click group; :mod:`benchmarks.book` the
book's functions ported as baselines; one module per benchmark
(:mod:`benchmarks.counters`) on a shared harness
(:mod:`benchmarks._harness`). See docs/benchmarks.md.
"""
