"""Watching what a server does from the test process: a SQLAlchemy event listener for the length of
a block, and which threads' statements are a request's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

BACKGROUND_THREADS = ("assay-sweeper", "assay-event-log")
"""Threads whose statements are not a request's (the sweeper, the event log's writer)."""


@contextmanager
def listening(target: Any, identifier: str, fn: Callable[..., Any]) -> Iterator[None]:
    """`fn` listens to `identifier` on `target` (`sqlalchemy.event.listen`) for the block."""
    event.listen(target, identifier, fn)
    try:
        yield
    finally:
        event.remove(target, identifier, fn)


def on_request_thread() -> bool:
    """Whether the calling thread answers requests (not one of `BACKGROUND_THREADS`)."""
    return threading.current_thread().name not in BACKGROUND_THREADS
