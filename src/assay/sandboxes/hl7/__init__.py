"""The HL7v2 sandbox: inbox and outbound messages over HTTP and MLLP, with ACKs (docs/sandboxes.md)."""

from __future__ import annotations

from assay.sandboxes.hl7.ack import Ack, acknowledge, inspect
from assay.sandboxes.hl7.mllp import MllpFramer, MllpListener
from assay.sandboxes.hl7.surface import Hl7Sandbox

__all__ = ["Ack", "Hl7Sandbox", "MllpFramer", "MllpListener", "acknowledge", "inspect"]
