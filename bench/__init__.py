"""Benchmarks of the runner (run by hand: ``python -m bench``); never timed tests."""
