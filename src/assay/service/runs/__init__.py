"""Benchmark runs, task runs and criterion runs: the run lifecycle of docs/api.md and the `/v1` API."""
