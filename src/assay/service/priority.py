"""`complete` keeps its pace while the agent path is busy: the GIL, shared sooner (issue 9).

One worker is one process and one GIL. Under agent load the event loop (uvloop) holds the GIL
almost without pause: the fast path answers warm reads on it and never blocks. A `complete` runs
on a worker thread, and every SQLite statement it executes releases the GIL (the `sqlite3`
module drops it around each step) — after which the thread waits for the loop to give it back.
CPython makes a running thread give up the GIL only after `sys.getswitchinterval()`, 5 ms by
default, so a `complete` of a couple of dozen statements waited a couple of dozen times up to
5 ms: 125–150 ms p50 under 16 agent clients against ~10 ms of its own CPU.

`share_the_gil()` sets a shorter switch interval in each worker process: a waiting thread gets
the GIL within `SWITCH_INTERVAL`, and the loop gets it back as soon. It changes nothing while no
other thread wants the GIL. Measured on a quiet machine, 16 clients, one switch interval per run
(`docs/performance.md`, "Session 7"): `complete` p50 under load 125–149 ms at 5 ms → 84 ms at
1 ms → 58–60 ms at 0.1–0.5 ms; agent throughput within the run-to-run noise (3,970–4,650 req/s).

Tried and not kept: the event loop sleeping 0.2–0.5 ms with the GIL released before each
fast-path answer while a grading ran — a few milliseconds off `complete` in single runs, within
the noise of repeated ones, at the cost of blocking the loop on purpose.
"""

from __future__ import annotations

import sys

__all__ = ["SWITCH_INTERVAL", "share_the_gil"]

SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits (CPython's default: 0.005)."""


def share_the_gil() -> None:
    """Set this process's switch interval to `SWITCH_INTERVAL` (once per worker, at startup)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
