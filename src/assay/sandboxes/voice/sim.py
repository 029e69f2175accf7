"""The optional LLM voice of the phone line's personas (`ASSAY_SIM_URL`, OpenAI-compatible, the
judge's client): it rewords what the dialogue manager or the caller's rules decided to say, in
the persona's own words. The rules stay in charge of facts and state — the model sees one
utterance, never the payer's data — and a rewording that drops or adds a number, amount, date or
identifier is thrown away for the rules' own words (`line/call.py`). Its words are stored as the
call's turns, so `rescore` and replays read them and never ask the model again.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from assay.core.judging import JudgeQuestion
from assay.judge import DEFAULT_MODEL, DEFAULT_TIMEOUT, JudgeSettings, OpenAIJudge
from assay.sandboxes.options import Option, positive
from assay.sandboxes.surface import Deployment

__all__ = ["SIM_KEY", "SIM_OPTIONS", "close_sim", "open_sim", "restyler"]


def _http_url(url: str) -> str | None:
    return None if url.strip().startswith(("http://", "https://")) else "must be an http(s) URL"


SIM_OPTIONS = MappingProxyType(
    {  # `ASSAY_SIM_*`, read as the judge's `ASSAY_JUDGE_*` are (docs/deployment.md)
        "sim_url": Option(str, None, "ASSAY_SIM_URL", _http_url),
        "sim_model": Option(str, DEFAULT_MODEL, "ASSAY_SIM_MODEL"),
        "sim_api_key": Option(str, None, "ASSAY_SIM_API_KEY"),
        "sim_timeout": Option(float, DEFAULT_TIMEOUT, "ASSAY_SIM_TIMEOUT", positive),
    }
)
"""The voice surface's settings section: the persona model, OpenAI-compatible."""

SIM_KEY = "voice.sim"
"""Where a deployment keeps its persona model client (`Deployment.runtime`)."""
PROMPT_VERSION = "voice-persona/1"
_SYSTEM = {
    "rep": (
        "You are a courteous health-insurance provider-services representative on a phone call. "
        "Reword the line you are given as you would say it. Keep every number, amount, date, code "
        "and identifier exactly as written; add no fact. Answer with the spoken words only."
    ),
    "caller": (
        "You are a patient calling a clinic, speaking naturally on the phone. Reword the line you "
        "are given as you would say it. Keep every number, date and identifier exactly as written; "
        "add no fact. Answer with the spoken words only."
    ),
}


def open_sim(deployment: Deployment) -> None:
    url = str(deployment.option("voice", "sim_url") or "").strip()
    if url and SIM_KEY not in deployment.runtime:
        settings = JudgeSettings(
            url,
            deployment.option("voice", "sim_model") or DEFAULT_MODEL,
            deployment.option("voice", "sim_api_key") or None,
            float(deployment.option("voice", "sim_timeout") or DEFAULT_TIMEOUT),
        )
        deployment.runtime[SIM_KEY] = OpenAIJudge(settings)


def close_sim(deployment: Deployment) -> None:
    client = deployment.runtime.pop(SIM_KEY, None)
    if isinstance(client, OpenAIJudge):
        client.close()


def restyler(deployment: Deployment) -> Callable[[str, str], str] | None:
    """(role, words) → the persona's words; None when no model is configured. Raises
    `JudgeUnavailable` when the model cannot answer."""
    client = deployment.runtime.get(SIM_KEY)
    if not isinstance(client, OpenAIJudge):
        return None

    def restyle(role: str, text: str) -> str:
        answer = client.ask(JudgeQuestion(PROMPT_VERSION, _SYSTEM[role], text))
        return answer.raw.strip()

    return restyle
