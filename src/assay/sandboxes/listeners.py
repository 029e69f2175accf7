"""Running the surfaces' listeners (MLLP, SFTP): once per deployment (docs/sandboxes.md, docs/deployment.md).

A surface with a server of its own returns a `Listener` from `Surface.listener(deployment)`.
`Listeners` starts every one of them on the running event loop and writes each bound port into
`deployment.ports` (a configured port of 0 means any free port), so credentials report the port
actually bound. Where they run:

- `assay serve` with one worker: in the API process, started and stopped by the app's lifespan;
- `assay serve --workers N`: in one listener process that `serve` starts first and supervises
  (`service/listeners.py`); the workers are told the bound ports and run no listener themselves.
"""

from __future__ import annotations

import logging

from assay.sandboxes.registry import SURFACES
from assay.sandboxes.surface import Deployment, Listener

__all__ = ["Listeners", "has_listeners"]

log = logging.getLogger("assay.sandboxes")


def has_listeners(deployment: Deployment) -> bool:
    """Whether any registered surface runs a listener in this deployment."""
    return any(surface.listener(deployment) is not None for surface in SURFACES.values())


class Listeners:
    """The deployment's listeners, started together and stopped together."""

    def __init__(self, deployment: Deployment):
        self.deployment = deployment
        self.running: dict[str, Listener] = {}

    async def start(self) -> dict[str, int]:
        """Start each surface's listener; the bound ports by surface name. A listener that cannot
        bind stops the ones already started and raises (the deployment must not run half-wired)."""
        for name, surface in SURFACES.items():
            listener = surface.listener(self.deployment)
            if listener is None:
                continue
            try:
                port = await listener.start()
            except BaseException:
                await self.stop()
                raise
            self.running[name] = listener
            self.deployment.ports[name] = port
            log.info("%s listener on %s:%d", name, self.deployment.host, port)
        return {name: self.deployment.ports[name] for name in self.running}

    async def stop(self) -> None:
        running, self.running = self.running, {}
        for name, listener in running.items():
            try:
                await listener.stop()
            except Exception:
                log.exception("stopping the %s listener failed", name)
