"""Benchmarks of sbroker against the queues a user would pick instead (issues 2 and 6)."""
