"""The org's catalog (docs/api.md): datasets, environments, benchmarks, tasks, criteria, solvers, keys."""
