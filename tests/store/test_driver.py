"""`store.driver.DriverTransaction` (the MLLP listener's hot path) writes exactly what SQLAlchemy's
`Connection.execute` writes, reads back through the same types, and leaves nothing behind when
its block fails — on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import JSON, Boolean, Column, Integer, MetaData, String, Table, bindparam, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from assay.store.database import pipelined
from assay.store.driver import DriverTransaction
from assay.store.models import UtcDateTime
from tests.service.conftest import Server

_METADATA = MetaData()
_PROBE = Table(
    f"driver_probe_{uuid.uuid4().hex[:8]}",
    _METADATA,
    Column("id", String(40), primary_key=True),
    Column("n", Integer),
    Column("at", UtcDateTime()),
    Column("body", JSON),
    Column("flag", Boolean),
    Column("note", String(40), nullable=True),
)
_INSERT = insert(_PROBE)
_ONE = select(_PROBE.c.id, _PROBE.c.n, _PROBE.c.at, _PROBE.c.body, _PROBE.c.flag, _PROBE.c.note).where(
    _PROBE.c.id == bindparam("id")
)
_LAST = select(_PROBE.c.id).where(_PROBE.c.n >= bindparam("n")).order_by(_PROBE.c.n.desc()).limit(1)


@pytest.fixture(scope="module")
def probe(server: Server) -> Iterator[Server]:
    _METADATA.create_all(server.database.engine)
    yield server
    _METADATA.drop_all(server.database.engine)


def _row(ident: str, n: int, body: Any) -> dict[str, Any]:
    at = datetime(2026, 3, 1, 12, 5, n % 60, 123000, tzinfo=UTC)
    return {"id": ident, "n": n, "at": at, "body": body, "flag": n % 2 == 0, "note": None}


def test_rows_written_on_the_driver_match_rows_written_by_sqlalchemy(probe: Server) -> None:
    engine = probe.database.engine
    body = {"text": "MSH|^~\\&|A\rPID|1", "list": [1, 2.5, None], "é": True}
    with engine.begin() as conn:
        conn.execute(_INSERT, [_row("sa-1", 1, body), _row("sa-2", 2, "plain text")])
    with DriverTransaction(engine) as tx:
        tx.execute(_INSERT, [_row("dr-1", 1, body)])  # one row
        tx.execute(_INSERT, [_row("dr-2", 2, "plain text"), _row("dr-3", 3, None)])  # executemany
    stored = {}
    with engine.connect() as conn:
        for ident in ("sa-1", "sa-2", "dr-1", "dr-2", "dr-3"):
            # As the driver holds them (no result processing): the two writers stored the same.
            raw = conn.exec_driver_sql(
                f"SELECT n, at, body, flag, note FROM {_PROBE.name} WHERE id = '{ident}'"
            ).one()
            stored[ident] = tuple(raw)
    assert stored["sa-1"] == stored["dr-1"] and stored["sa-2"] == stored["dr-2"]
    with DriverTransaction(engine) as tx:
        found = tx.execute(_ONE, {"id": "dr-1"}).first()
        missing = tx.execute(_ONE, {"id": "nobody"}).first()
        last = tx.execute(_LAST, {"n": 1}).scalar()
    assert missing is None and last == "dr-3"
    assert (found.id, found.n, found.at, found.body, found.flag, found.note) == tuple(
        _row("dr-1", 1, body).values()
    )
    assert found.at.tzinfo is not None  # UtcDateTime's result processor ran
    with engine.connect() as conn:
        assert conn.execute(_ONE, {"id": "dr-3"}).one().body is None
        assert conn.execute(_ONE, {"id": "dr-2"}).one().body == "plain text"


def test_a_failed_block_leaves_nothing_and_the_pool_stays_usable(probe: Server) -> None:
    engine = probe.database.engine
    with pytest.raises(RuntimeError), DriverTransaction(engine) as tx:
        tx.execute(_INSERT, [_row("gone-1", 10, {"a": 1})])
        raise RuntimeError("the ACK could not be built")
    with pytest.raises(Exception), DriverTransaction(engine) as tx:  # noqa: B017 - the driver's own error
        tx.execute(_INSERT, [_row("gone-2", 11, None)])
        tx.execute(_INSERT, [_row("gone-2", 11, None)])  # duplicate key: the driver refuses it
    with DriverTransaction(engine) as tx:
        tx.execute(_INSERT, [_row("kept-1", 12, None)])
    with engine.connect() as conn:
        ids = conn.execute(select(_PROBE.c.id).where(_PROBE.c.n >= 10)).scalars().all()
    assert ids == ["kept-1"]


def test_pipelined_writes_are_sent_together_and_a_failure_among_them_leaves_nothing(probe: Server) -> None:
    """`store.database.pipelined` (`complete`'s criterion runs and teardown): on PostgreSQL the
    writes go out in psycopg's pipeline mode, their answers awaited once, while a read inside the
    block is answered at once; a statement refused inside the block fails the unit of work, which
    leaves nothing behind."""
    database = probe.database
    with database.transaction() as session:
        with pipelined(session):
            session.execute(_INSERT, [_row("piped-1", 20, {"a": 1})])
            session.execute(_INSERT, [_row("piped-2", 21, None)])
            driver = session.connection().connection.driver_connection
            if probe.backend == "postgres":
                assert driver.pgconn.pipeline_status != 0, "in pipeline mode"  # type: ignore[union-attr]
            # A read inside the block is answered at once (a surface's teardown hook reads).
            inside = session.execute(select(_PROBE.c.id).where(_PROBE.c.n >= 20).order_by(_PROBE.c.n))
            assert inside.scalars().all() == ["piped-1", "piped-2"]
            assert session.execute(select(_PROBE.c.id).where(_PROBE.c.id == "nobody")).first() is None
            session.execute(_INSERT, [_row("piped-4", 22, None)])
        ids = (
            session.execute(select(_PROBE.c.id).where(_PROBE.c.n >= 20).order_by(_PROBE.c.n)).scalars().all()
        )
        assert ids == ["piped-1", "piped-2", "piped-4"], "and after it"
    with pytest.raises(Exception), database.transaction() as session, pipelined(session):  # noqa: B017
        session.execute(_INSERT, [_row("piped-3", 30, None)])
        session.execute(_INSERT, [_row("piped-1", 31, None)])  # duplicate key: the driver refuses it
    with database.reading() as session:
        ids = (
            session.execute(select(_PROBE.c.id).where(_PROBE.c.n >= 20).order_by(_PROBE.c.n)).scalars().all()
        )
    assert ids == ["piped-1", "piped-2", "piped-4"]


class _OrmBase(DeclarativeBase):
    pass


class _OrmProbe(_OrmBase):
    __tablename__ = f"driver_orm_probe_{uuid.uuid4().hex[:8]}"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)


def test_an_orm_flush_inside_a_pipelined_block_updates_its_rows(probe: Server) -> None:
    """`start` and `complete` flush ORM changes inside `pipelined` (the seeded sandboxes'
    credentials, the task run's row on SQLite). The flush checks each UPDATE's row count, which
    pipeline mode knows only once answered: those UPDATEs are answered at once, the INSERTs queued
    before them with them, so the flush neither fails (`StaleDataError`) nor loses a write."""
    engine = probe.database.engine
    _OrmBase.metadata.create_all(engine)
    try:
        with probe.database.transaction() as session:
            session.add_all([_OrmProbe(id="orm-1", n=1), _OrmProbe(id="orm-2", n=1)])
        with probe.database.transaction() as session:
            rows = list(session.scalars(select(_OrmProbe).order_by(_OrmProbe.id)))
            with pipelined(session):
                session.execute(_INSERT, [_row("orm-piped", 30, None)])
                rows[0].n, rows[1].n = 2, 3
                session.add(_OrmProbe(id="orm-3", n=4))
                session.flush()
                assert (
                    session.execute(select(_PROBE.c.id).where(_PROBE.c.id == "orm-piped")).scalar()
                    == "orm-piped"
                )
        with probe.database.reading() as session:
            found = {row.id: row.n for row in session.scalars(select(_OrmProbe))}
        assert found == {"orm-1": 2, "orm-2": 3, "orm-3": 4}
    finally:
        _OrmBase.metadata.drop_all(engine)
