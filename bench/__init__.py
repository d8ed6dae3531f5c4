"""Benchmarks of sbroker; bench/README.md says which command answers which question."""
