"""The optional LLM voice of the phone line's personas (`ASSAY_SIM_URL`, OpenAI-compatible, the
judge's client): it rewords what the dialogue manager or the caller's rules decided to say, in
the persona's own words. The rules stay in charge of facts and state — the model sees one
utterance, never the payer's data — and a rewording that drops or adds a number, amount, date or
identifier is thrown away for the rules' own words (`line/call.py`). Its words are stored as the
call's turns, so `rescore` and replays read them and never ask the model again.
"""

from __future__ import annotations

from collections.abc import Callable

from assay.core.judging import JudgeQuestion
from assay.judge import JudgeSettings, OpenAIJudge
from assay.sandboxes.surface import Deployment

__all__ = ["SIM_KEY", "close_sim", "open_sim", "restyler"]

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
    settings = deployment.option("voice", "sim")
    if isinstance(settings, JudgeSettings) and SIM_KEY not in deployment.runtime:
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
