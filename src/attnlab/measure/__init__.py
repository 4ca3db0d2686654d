"""Measuring this machine honestly: what it is and how fast it multiplies
(:mod:`~attnlab.measure.machine`), and interleaved timing and peak tensor memory
(:mod:`~attnlab.measure.timing`). Shared by the scripts in ``benchmarks/`` and the complexity
lab, so every figure says which machine it came from and is measured the same way."""
