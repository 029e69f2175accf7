"""The sweeper: applies passed deadlines and expired run tokens nobody has read (docs/api.md).

Every worker runs a `Sweeper` thread, but only the holder of the `sweeper` lease row sweeps, so a
deployment sweeps once per interval, never twice at the same time. A lease lasts three intervals:
if its holder dies, another worker takes over after that. Each run's due task runs are settled under
their own row locks, like any other lifecycle change, so a sweep and a `complete` never both end a
task run.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timedelta

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from assay.service.runs import states
from assay.service.runs.lifecycle import settle_due
from assay.store import Database, utcnow
from assay.store.models import BenchmarkRun, Lease, TaskRun

__all__ = ["Sweeper", "sweep_once", "take_lease"]

log = logging.getLogger("assay.sweeper")
LEASE = "sweeper"


def take_lease(session: Session, holder: str, ttl: timedelta, now: datetime, name: str = LEASE) -> bool:
    """Hold the named lease for `ttl` if it is free, expired, or already ours."""
    lease = session.scalars(select(Lease).where(Lease.name == name).with_for_update()).first()
    if lease is None:
        session.add(Lease(name=name, holder=holder, expires_at=now + ttl))
        session.flush()
        return True
    if lease.holder != holder and lease.expires_at > now:
        return False
    lease.holder, lease.expires_at = holder, now + ttl
    return True


def due_run_ids(session: Session, now: datetime) -> list[str]:
    """Runs with a task run that `states.due_event` would end, in SQL: a started one past its
    deadline, or one never started under an expired token. (A run whose token has expired while a
    task run is still within its deadline is not due, so it is neither locked nor counted.)"""
    started = and_(TaskRun.phase == states.STARTED[0], TaskRun.status == states.STARTED[1])
    created = and_(TaskRun.phase == states.CREATED[0], TaskRun.status == states.CREATED[1])
    due = (
        select(TaskRun.benchmark_run_id)
        .join(BenchmarkRun, BenchmarkRun.id == TaskRun.benchmark_run_id)
        .where(
            or_(
                and_(started, TaskRun.deadline_at <= now),
                and_(created, BenchmarkRun.token_expires_at <= now),
            )
        )
    )
    return list(session.scalars(select(BenchmarkRun.id).where(BenchmarkRun.id.in_(due)).limit(500)))


def sweep_once(database: Database, holder: str, ttl: timedelta) -> int:
    """One sweep if this worker holds the lease; returns how many runs it settled."""
    now = utcnow()
    with database.transaction() as session:
        if not take_lease(session, holder, ttl, now):
            return 0
        run_ids = due_run_ids(session, now)
    settled = 0
    for run_id in run_ids:
        with database.transaction() as session:
            benchmark_run = session.get(BenchmarkRun, run_id)
            if benchmark_run is not None and settle_due(session, benchmark_run, now):
                settled += 1
    return settled


class Sweeper:
    def __init__(self, database: Database, interval: float):
        self.database = database
        self.interval = interval
        self.holder = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="assay-sweeper", daemon=True)

    def start(self) -> None:
        if self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        ttl = timedelta(seconds=self.interval * 3)
        while not self._stop.wait(self.interval):
            try:
                sweep_once(self.database, self.holder, ttl)
            except Exception:  # a failed sweep must not kill the thread; the next one retries
                log.exception("sweep failed")
