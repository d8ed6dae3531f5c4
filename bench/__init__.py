"""Benchmarks of sbroker, against the queues a user would pick instead and on its own
(bench/README.md says which command answers which question)."""
