"""The reference agent (`assay agent run`): a plain tool-calling loop over an OpenAI-compatible
chat endpoint, working a benchmark through the task runs' tools."""

from assay.clients.agent.loop import SYSTEM_PROMPT, AgentLimits, AgentResult, ModelEndpoint, work_task_run
from assay.clients.agent.runner import RunSummary, TaskOutcome, run_benchmark

__all__ = [
    "SYSTEM_PROMPT",
    "AgentLimits",
    "AgentResult",
    "ModelEndpoint",
    "RunSummary",
    "TaskOutcome",
    "run_benchmark",
    "work_task_run",
]
