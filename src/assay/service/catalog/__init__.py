"""The org's catalog (SPEC §5.1): datasets, environments, benchmarks, tasks, criteria, solvers, keys."""
