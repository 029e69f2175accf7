"""What the surfaces keep while a deployment's app runs: opened by its lifespan, closed at shutdown.

A surface that talks to something outside Assay (the FHIR surface's external server) keeps its
client in `Deployment.runtime`, opened from the settings the lifespan passed down
(`Deployment.options`), never from environment variables read at use time, so two apps in one
process (a test's, the demo's) keep their own.
"""

from __future__ import annotations

import logging

from assay.sandboxes.registry import LIFECYCLE
from assay.sandboxes.surface import Deployment, Lifecycle

__all__ = ["close_surfaces", "open_surfaces"]

log = logging.getLogger("assay.sandboxes")


def open_surfaces(deployment: Deployment) -> None:
    """Each surface's `open`; one that fails closes those already opened and raises."""
    opened: list[Lifecycle] = []
    for surface in LIFECYCLE.values():
        try:
            surface.open(deployment)
        except BaseException:
            for done in reversed(opened):
                done.close(deployment)
            raise
        opened.append(surface)


def close_surfaces(deployment: Deployment) -> None:
    """Each surface's `close`; a failure is logged and the others still close."""
    for name, surface in LIFECYCLE.items():
        try:
            surface.close(deployment)
        except Exception:
            log.exception("closing the %s surface failed", name)
