"""The processes `assay serve --workers N` starts exit when `serve` itself is gone.

`serve` with several workers is a supervisor: uvicorn's worker processes and the listener process
(`service/listeners.py`) are its children. When the supervisor is killed with SIGKILL (the OOM
killer, `kill -9 <pid>`, a process manager that signals only the main pid), nothing told them:
the workers kept answering on the API port and the listener process kept the MLLP and SFTP ports,
so a restart could not bind them (a fault test that kills the main process shows it). Each child therefore
watches its parent: `serve` puts its pid in `ASSAY_SERVE_PID`, and a child whose parent is no longer that
process (it was re-parented) stops itself the way SIGTERM stops it — requests in flight finish,
the event queue is drained — and exits outright if that has not happened after `GRACE` seconds.

A process started any other way (one worker, tests, `uvicorn --factory`) has no `ASSAY_SERVE_PID`
and watches nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

__all__ = ["GRACE", "PARENT_PID", "exit_with_parent"]

log = logging.getLogger("assay.service")

PARENT_PID = "ASSAY_SERVE_PID"
INTERVAL = 1.0
"""Seconds between two looks at the parent (one `getppid` call)."""
GRACE = 20.0
"""Seconds a child orphaned by its supervisor has to stop after its SIGTERM before it exits."""

_watching = False
_watching_lock = threading.Lock()


def exit_with_parent(parent: int | None = None) -> bool:
    """Start watching `parent` (default: `ASSAY_SERVE_PID`) once per process; False when there is
    nothing to watch."""
    global _watching
    parent = parent or int(os.environ.get(PARENT_PID) or 0)
    if not parent or parent == os.getpid():
        return False
    with _watching_lock:
        if _watching:
            return True
        _watching = True
    threading.Thread(target=_watch, args=(parent,), name="assay-parent-watch", daemon=True).start()
    return True


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(INTERVAL)
    log.warning("the assay serve process %d is gone; stopping this process %d", parent, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE)
    os._exit(1)  # the graceful stop did not finish: do not keep the ports
