"""The SQLite write queue (`store/write_queue.py`): every write transaction of the process — a
`Database` unit of work, a surface's `engine.begin()`, a `DriverTransaction` — waits its turn in
arrival order, re-entrantly on one thread, and hands it on however the transaction ends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Column, MetaData, String, Table, insert, select, text

from assay.store import Database, sqlite_url
from assay.store.driver import DriverTransaction
from assay.store.write_queue import FairLock, queue_of, write_turn

_METADATA = MetaData()
_ARRIVALS = Table("arrivals", _METADATA, Column("who", String))  # in insert order: SQLite's rowid


@pytest.fixture
def database(tmp_path: Path) -> Database:
    database = Database(sqlite_url(tmp_path / "queue.db"))
    _METADATA.create_all(database.engine)
    return database


def _waiting(database: Database) -> int:
    queue = queue_of(database.engine)
    assert queue is not None
    return len(queue._waiters)


def test_writers_of_every_kind_take_their_turns_in_arrival_order(database: Database) -> None:
    engine = database.engine

    def by_engine(who: str) -> None:
        with engine.begin() as conn:
            conn.execute(insert(_ARRIVALS).values(who=who))

    def by_unit_of_work(who: str) -> None:
        with database.transaction() as session:
            session.execute(insert(_ARRIVALS).values(who=who))

    def by_driver(who: str) -> None:
        with DriverTransaction(engine) as tx:
            tx.execute(insert(_ARRIVALS), {"who": who})

    writers = [by_engine, by_driver, by_unit_of_work] * 3
    threads = []
    with engine.begin() as holder:  # the first writer holds SQLite's lock while the others arrive
        holder.execute(insert(_ARRIVALS).values(who="holder"))
        for n, write in enumerate(writers):
            thread = threading.Thread(target=write, args=(f"w{n}",))
            thread.start()
            threads.append(thread)
            deadline = time.monotonic() + 5
            while _waiting(database) < n + 1:  # in line before the next one comes
                assert time.monotonic() < deadline, f"writer {n} never queued: it waits elsewhere"
                time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=10)
    with engine.connect() as conn:
        order = conn.execute(select(_ARRIVALS.c.who).order_by(text("rowid"))).scalars().all()
    assert order == ["holder"] + [f"w{n}" for n in range(len(writers))]


def test_a_turn_is_reentrant_on_its_thread(database: Database) -> None:
    engine = database.engine
    with write_turn(engine), database.write_lock(), engine.begin() as conn:
        conn.execute(insert(_ARRIVALS).values(who="nested"))
    assert _waiting(database) == 0
    queue = queue_of(engine)
    assert queue is not None and queue._owner is None  # every level handed back


def test_readers_take_no_turn(database: Database) -> None:
    with database.engine.begin() as conn:
        conn.execute(insert(_ARRIVALS).values(who="writer"))
        with database.reading() as session:  # would wait for the writer if it queued
            assert session.execute(select(_ARRIVALS.c.who)).scalars().all() == []


def test_a_failed_transaction_hands_its_turn_on(database: Database) -> None:
    engine = database.engine
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(insert(_ARRIVALS).values(who="rolled back"))
        raise RuntimeError("the handler failed")
    with pytest.raises(RuntimeError), DriverTransaction(engine) as tx:
        tx.execute(insert(_ARRIVALS), {"who": "rolled back too"})
        raise RuntimeError("the handler failed")
    done = threading.Event()

    def write() -> None:
        with engine.begin() as conn:
            conn.execute(insert(_ARRIVALS).values(who="next"))
        done.set()

    threading.Thread(target=write).start()
    assert done.wait(5), "the turn was not handed on after a rollback"
    with engine.connect() as conn:
        assert conn.execute(select(_ARRIVALS.c.who)).scalars().all() == ["next"]


def test_a_waiter_that_gives_up_leaves_the_line() -> None:
    lock = FairLock()
    assert lock.acquire(1)
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(lock.acquire(0.05)))
    waiter.start()
    waiter.join()
    assert results == [False] and not lock._waiters
    lock.release()
    assert lock.acquire(0.05)  # free again
    lock.release()
