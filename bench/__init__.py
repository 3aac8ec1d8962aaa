"""Benchmarks that print tables (not timed tests): run `make bench` or `python -m bench.<name>`."""
