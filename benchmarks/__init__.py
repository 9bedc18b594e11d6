"""pmutop's benchmarks: `python -m benchmarks` (see README.md, section Benchmarks)."""
