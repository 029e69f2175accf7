"""`OpenAIJudge`: one chat completion per question, every failure as `JudgeUnavailable`.

The request is fixed: the prompt's system and user parts, `temperature: 0`, a small
`max_tokens`. The answer's text is returned raw (the check parses it), with the model the
endpoint says answered, the latency measured here, and `usage` token counts when given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.checks import semantic_unavailable, use_model
from assay.core.judging import JudgeAnswer, JudgeQuestion, JudgeUnavailable

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT",
    "JudgeSettings",
    "OpenAIJudge",
    "judge_from_env",
    "voice_semantic_from_env",
]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 20.0
MAX_TOKENS = 300


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    url: str
    model: str = DEFAULT_MODEL
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings | None:
        """None when `ASSAY_JUDGE_URL` is unset; a `ValueError` naming a bad variable."""
        env = os.environ if environ is None else environ
        url = env.get("ASSAY_JUDGE_URL", "").strip()
        if not url:
            return None
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"ASSAY_JUDGE_URL must be an http(s) URL, got {url!r}")
        raw_timeout = env.get("ASSAY_JUDGE_TIMEOUT") or str(DEFAULT_TIMEOUT)
        try:
            timeout = float(raw_timeout)
        except ValueError:
            raise ValueError(f"ASSAY_JUDGE_TIMEOUT must be a number, got {raw_timeout!r}") from None
        if timeout <= 0:
            raise ValueError(f"ASSAY_JUDGE_TIMEOUT must be > 0, got {raw_timeout!r}")
        return cls(
            url=url,
            model=env.get("ASSAY_JUDGE_MODEL") or DEFAULT_MODEL,
            api_key=env.get("ASSAY_JUDGE_API_KEY") or None,
            timeout=timeout,
        )


class OpenAIJudge:
    """A `Judge` over an OpenAI-compatible `POST /chat/completions`; thread-safe (one
    `httpx.Client` with its own pool), closed with `close()`."""

    def __init__(self, settings: JudgeSettings, *, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        url = settings.url.rstrip("/")
        self.endpoint = url if url.endswith("/chat/completions") else url + "/chat/completions"
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        import httpx  # here, not at the top: `assay verify` reads the settings on every run (0.2-0.4 s)

        self._client = httpx.Client(timeout=settings.timeout, headers=headers, transport=transport)

    @property
    def timeout(self) -> float:
        return self.settings.timeout

    def ask(self, question: JudgeQuestion) -> JudgeAnswer:
        body = {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": question.system},
                {"role": "user", "content": question.user},
            ],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        }
        import httpx

        started = time.perf_counter()
        try:
            response = self._client.post(self.endpoint, json=body)
        except httpx.TimeoutException:
            raise JudgeUnavailable(
                f"the judge at {self.endpoint} did not answer within {self.timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise JudgeUnavailable(f"the judge at {self.endpoint} cannot be reached: {exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        if response.status_code >= 400:
            raise JudgeUnavailable(
                f"the judge at {self.endpoint} answered HTTP {response.status_code}: {response.text[:200]}"
            )
        return _answer(response, latency_ms, self.settings.model)

    def close(self) -> None:
        self._client.close()


def _answer(response: httpx.Response, latency_ms: float, asked_model: str) -> JudgeAnswer:
    """The first choice's message content; anything else is not a chat completion."""
    try:
        data: Any = response.json()
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise JudgeUnavailable(
            f"the judge's response is not an OpenAI chat completion: {response.text[:200]!r}"
        ) from None
    if not isinstance(content, str):
        raise JudgeUnavailable(f"the judge's message content is not text: {content!r}"[:300])
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return JudgeAnswer(
        raw=content,
        model=str(data.get("model") or asked_model),
        latency_ms=latency_ms,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def judge_from_env(environ: Mapping[str, str] | None = None) -> OpenAIJudge | None:
    """The configured judge, or None when `ASSAY_JUDGE_URL` is unset."""
    settings = JudgeSettings.from_env(environ)
    return OpenAIJudge(settings) if settings else None


def voice_semantic_from_env(env: Mapping[str, str]) -> bool:
    """`ASSAY_VOICE_SEMANTIC`: `1`/`true`/`yes` on, `0`/`false`/`no`/unset off; on without the
    `semantic` extra is a `ValueError` saying how to install it. `ASSAY_VOICE_MODEL` (a folder
    with `model.onnx` and `tokenizer.json`) is applied here too: the semantic tier then uses that
    model, whether it is on for every criterion or asked for by one."""
    folder = env.get("ASSAY_VOICE_MODEL", "").strip()
    use_model(Path(folder) if folder else None)
    raw = env.get("ASSAY_VOICE_SEMANTIC", "").strip().casefold()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw not in ("1", "true", "yes", "on"):
        raise ValueError(f"ASSAY_VOICE_SEMANTIC must be 1 or 0, got {raw!r}")
    reason = semantic_unavailable()
    if reason:
        raise ValueError(f"ASSAY_VOICE_SEMANTIC=1 but {reason}")
    return True
