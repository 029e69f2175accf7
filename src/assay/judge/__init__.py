"""The LLM judge over HTTP: an OpenAI-compatible chat-completions client.

`verify_task` receives a `core.judging.Judge`; this package is the real one, above the
verification core in the layers contract (the core never imports HTTP libraries). The service
and the command line build it from the environment with `judge_from_env`:

- `ASSAY_JUDGE_URL` — the endpoint's base URL (`…/v1`), or the full `…/chat/completions` URL;
- `ASSAY_JUDGE_MODEL` — the model name sent (default `gpt-4o-mini`);
- `ASSAY_JUDGE_API_KEY` — sent as `Authorization: Bearer …` when set;
- `ASSAY_JUDGE_TIMEOUT` — seconds for one answer (default 20).

`voice_semantic_from_env` reads `ASSAY_VOICE_SEMANTIC` the same way for both callers.
"""

from assay.judge.client import (
    DEFAULT_MODEL,
    DEFAULT_TIMEOUT,
    JudgeSettings,
    OpenAIJudge,
    judge_from_env,
    voice_semantic_from_env,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT",
    "JudgeSettings",
    "OpenAIJudge",
    "judge_from_env",
    "voice_semantic_from_env",
]
