"""The HL7v2 sandbox on the `Surface` seam (docs/sandboxes.md, docs/assertions.md, docs/snapshots.md).

Dataset type `hl7` seeds the inbox: `{"inbox": ["MSH|...", ...]}` (or one message as a string);
each must parse and be at most 1 MB, or the create is a 422 naming `data.inbox.<i>`. The agent
reads the inbox over HTTP and sends over HTTP or MLLP; accepted (`AA`) messages are what
`hl7-structural` judges. Credentials: `{"hl7": {host, port, receiving_facility}}` — the MLLP
listener's bound port and the MSH-6.1 value that routes a message to this task run (random per
task run, `new_facility`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Select, delete
from sqlalchemy.orm import Session

from assay.core.state import Hl7Record, hl7_digests
from assay.formats.hl7 import Hl7ParseError, parse_messages
from assay.sandboxes.hl7.ack import MAX_MESSAGE_BYTES
from assay.sandboxes.hl7.mllp import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_PER_SOURCE,
    MllpListener,
)
from assay.sandboxes.hl7.routes import hl7_router
from assay.sandboxes.hl7.store import append, last_outbound, outbound_until, register_facility
from assay.sandboxes.hl7.tables import Hl7Facility, Hl7MessageRow
from assay.sandboxes.hl7.tools import TOOLS
from assay.sandboxes.options import Option, not_negative
from assay.sandboxes.surface import (
    Deployment,
    LogSurface,
    ProvisionFailed,
    Purge,
    RecordsView,
    RunContext,
    ScenarioStep,
    SurfaceTarget,
)
from assay.snapshot import SnapshotWriter
from assay.store.models import Sandbox

__all__ = ["DEFAULT_MLLP_PORT", "Hl7Sandbox", "Hl7View", "message_problem", "new_facility"]

DEFAULT_MLLP_PORT = 2575


def message_problem(message: Any) -> str | None:
    """Why `message` cannot sit in an inbox (not a string, over 1 MB, not HL7v2), or None."""
    if not isinstance(message, str):
        return "must be an HL7v2 message as a string"
    if len(message.encode("utf-8")) > MAX_MESSAGE_BYTES:
        return "is over the 1 MB limit of an HL7 message"
    try:
        parse_messages(message)
    except Hl7ParseError as exc:
        return f"is not an HL7v2 message: {exc}"
    return None


FACILITY_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
FACILITY_LENGTH = 12
"""Random characters in a receiving facility (60 bits): the MSH-6.1 value is the only thing that
routes an MLLP message to a task run, so it must not be guessable from anything else (a task run
id, a neighbour run's facility). `ASSAY-` plus 12 is 18 characters, inside HD.1's 20."""


def new_facility() -> str:
    """A task run's receiving facility (MSH-6.1), from a secure random source."""
    return "ASSAY-" + "".join(secrets.choice(FACILITY_ALPHABET) for _ in range(FACILITY_LENGTH))


def _normalised(message: str) -> str:
    """The message as stored and listed: CR segment ends, framing and edges stripped."""
    return "\r".join(parsed.text for parsed in parse_messages(message))


class Hl7View(RecordsView):
    """The outbound messages; nothing is outbound before the agent acts (`seed` and
    `seed_hl7_inbox` fill the inbox), so a captured sandbox's baseline is empty."""

    records: list[Hl7Record]

    def hl7_outbound(self) -> Sequence[Hl7Record]:
        return self.records

    def write(self, writer: SnapshotWriter, record: Hl7Record) -> None:
        writer.add_hl7(record)

    def digests(self) -> dict[str, str]:
        return hl7_digests(self.records)


def _seed_inbox(run: RunContext, sandbox: Sandbox, step: Mapping[str, Any]) -> None:
    """The scenario step `seed_hl7_inbox {message}` (docs/sandboxes.md)."""
    message = step.get("message")
    problem = message_problem(message)
    if problem:
        raise ProvisionFailed(f"scenario step seed_hl7_inbox: message {problem}")
    append(run.session.connection(), sandbox.id, "inbox", _normalised(str(message)), None)


class Hl7Sandbox(LogSurface):
    tools = TOOLS
    name = "hl7"
    options = MappingProxyType(
        {
            "port": Option(int, DEFAULT_MLLP_PORT, "ASSAY_MLLP_PORT", not_negative),
            "idle_timeout": Option(float, DEFAULT_IDLE_TIMEOUT, "ASSAY_MLLP_IDLE_TIMEOUT"),
            "frame_timeout": Option(float, DEFAULT_FRAME_TIMEOUT, "ASSAY_MLLP_FRAME_TIMEOUT"),
            "max_per_source": Option(
                int, DEFAULT_MAX_PER_SOURCE, "ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE", not_negative
            ),
        }
    )
    dataset_type = "hl7"
    state_fields = frozenset({"hl7_outbound"})
    view = Hl7View
    scenario_steps: Mapping[str, ScenarioStep] = {"seed_hl7_inbox": _seed_inbox}

    def purge(self, gone: Purge) -> None:
        gone.session.execute(delete(Hl7MessageRow).where(Hl7MessageRow.sandbox_id.in_(gone.sandbox_ids)))
        gone.session.execute(delete(Hl7Facility).where(Hl7Facility.playground_id.in_(gone.playground_ids)))

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        inbox = data.get("inbox") if isinstance(data, dict) else None
        if isinstance(inbox, str):
            inbox = [inbox]
        if not isinstance(inbox, list):
            return {"data.inbox": ["must be an array of raw HL7v2 messages"]}
        errors: dict[str, list[str]] = {}
        for i, message in enumerate(inbox):
            problem = message_problem(message)
            if problem:
                errors[f"data.inbox.{i}"] = [problem]
        return errors

    def provision(self, run: RunContext) -> dict[str, Any]:
        return {"receiving_facility": new_facility()}

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        facility = (sandbox.credentials or {})["receiving_facility"]
        # Flushed with the rest of `start`'s rows: nothing reads it before the commit.
        register_facility(run.session, facility, sandbox, run.task_run_id)
        connection = run.session.connection()
        for dataset in datasets:
            inbox = (dataset.get("data") or {}).get("inbox") or []
            for message in [inbox] if isinstance(inbox, str) else inbox:
                append(connection, sandbox.id, "inbox", _normalised(message), None)

    def endpoints(self, base: str) -> dict[str, str]:
        return {"hl7_inbox": f"{base}/hl7/inbox", "hl7_outbound": f"{base}/hl7/outbound"}

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        facility = (sandbox.credentials or {}).get("receiving_facility")
        return {
            "hl7": {
                "host": host,
                "port": deployment.port("hl7", DEFAULT_MLLP_PORT),
                "receiving_facility": facility,
            }
        }

    def router(self, target: SurfaceTarget) -> APIRouter:
        return hl7_router(target)

    def listener(self, deployment: Deployment) -> MllpListener:
        idle = float(deployment.option("hl7", "idle_timeout", DEFAULT_IDLE_TIMEOUT))
        return MllpListener(
            deployment,
            deployment.port("hl7", DEFAULT_MLLP_PORT),
            idle,
            frame_timeout=float(deployment.option("hl7", "frame_timeout", DEFAULT_FRAME_TIMEOUT)),
            max_per_source=int(deployment.option("hl7", "max_per_source", DEFAULT_MAX_PER_SOURCE)),
        )

    def last_seq(self, sandbox_id: str) -> Select[Any]:
        return last_outbound(sandbox_id)

    def records_until(self, session: Session, sandbox_id: str, seq: int) -> Sequence[Hl7Record]:
        return outbound_until(session, sandbox_id, seq)
