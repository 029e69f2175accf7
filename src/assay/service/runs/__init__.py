"""Benchmark runs, task runs and criterion runs: the run lifecycle of SPEC §1.1 and the `/v1` API."""
