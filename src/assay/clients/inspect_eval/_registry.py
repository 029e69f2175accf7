"""Inspect's entry point (`[project.entry-points.inspect_ai] assay`): importing it registers the
`assay/benchmark` task and the `assay/pass_k` reducer."""

from assay.clients.inspect_eval.task import benchmark, pass_k

__all__ = ["benchmark", "pass_k"]
