"""The store below the API: migrations match the models exactly (on each backend), and keyset
pagination visits every row once in both directions, ties on `created_at` included (hypothesis)."""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, insert, select

import assay.sandboxes
from assay.store import Database, new_id, paginate, sqlite_url, utcnow
from assay.store.copy_text import copy_field, copy_text
from assay.store.database import ReadOnlyViolation, read_only
from assay.store.models import Base, Organization
from tests.service.conftest import Server


def _import_all_tables() -> None:
    for module in pkgutil.walk_packages(assay.sandboxes.__path__, "assay.sandboxes."):
        if module.name.endswith(".tables"):
            importlib.import_module(module.name)


def test_migrations_match_the_models(server: Server) -> None:
    _import_all_tables()
    with server.database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    database = Database(sqlite_url(tmp_path_factory.mktemp("store")))
    database.migrate()
    yield database
    database.dispose()


@settings(max_examples=40, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=25),
    limit=st.integers(min_value=1, max_value=7),
)
def test_pagination_walks_every_row_once(database: Database, offsets: list[int], limit: int) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    with database.transaction() as session:
        session.execute(delete(Organization))
        for offset in offsets:
            ident = new_id("org_")
            session.add(Organization(id=ident, name=ident, created_at=base + timedelta(milliseconds=offset)))
    with database.transaction() as session:
        rows = session.scalars(select(Organization)).all()
        expected = [row.id for row in sorted(rows, key=lambda row: (row.created_at, row.id), reverse=True)]
        seen, cursor, last = [], None, None
        while True:
            page = paginate(session, select(Organization), Organization, limit=limit, cursor=cursor)
            assert len(page.items) <= limit
            seen += [row.id for row in page.items]
            last = page
            if page.next is None:
                break
            cursor = page.next
        assert seen == expected
        back, cursor = list(last.items), last.prev
        while cursor is not None:
            page = paginate(session, select(Organization), Organization, limit=limit, cursor=cursor)
            back = list(page.items) + back
            cursor = page.prev
        assert [row.id for row in back] == expected
        oldest = paginate(
            session, select(Organization), Organization, limit=100, cursor=None, newest_first=False
        )
        assert [row.id for row in oldest.items] == expected[::-1]


def test_a_reading_unit_of_work_is_one_round_trip_a_statement(server: Server) -> None:
    """On PostgreSQL a reading unit of work runs its statements in autocommit (no `BEGIN`, no
    `ROLLBACK` around a token lookup: two round trips of three), and holds no transaction open
    between them; the next transaction of the same pooled connection is a transaction again.
    On SQLite it stays a plain `BEGIN` (a WAL snapshot)."""
    database = server.database
    with database.reading() as session:
        session.execute(select(Organization.id).limit(1)).all()
        raw = session.connection().connection.dbapi_connection
        if database.is_sqlite:
            assert raw is not None and raw.in_transaction
            return
        import psycopg.pq

        assert raw is not None and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with database.transaction() as session:
        session.execute(select(Organization.id).limit(1)).all()
        raw = session.connection().connection.dbapi_connection
        assert raw is not None and raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    ident = f"org_{uuid.uuid4().hex[:12]}"
    with pytest.raises(ReadOnlyViolation), database.reading() as session:  # it would commit at once
        session.execute(insert(Organization).values(id=ident, name="written", created_at=utcnow()))
    with database.reading() as session:
        assert session.get(Organization, ident) is None


def test_a_read_on_the_read_engine_sees_every_write_acknowledged_before_it(server: Server) -> None:
    """Read-your-writes for transactions moved off the write path: a write is acknowledged once
    its COMMIT returned, and a read begun after that on the read engine sees it, from any thread
    and any pooled connection — on SQLite a new `BEGIN` takes its WAL snapshot at its first read
    (a pooled connection's earlier snapshot ended when it went back to the pool), on PostgreSQL
    each autocommit statement reads what was committed when it started. Writers and readers on
    several threads at once, so connections pass between them."""
    database = server.database
    reader = read_only(database.engine)
    tag = uuid.uuid4().hex[:8]

    def write_then_read(thread: int) -> None:
        prefix = f"ryw {tag} {thread} "
        for i in range(25):
            with database.engine.begin() as conn:
                conn.execute(
                    insert(Organization).values(
                        id=new_id("org_"), name=f"{prefix}{i:02}", created_at=utcnow()
                    )
                )
            with reader.connect() as conn:
                latest = conn.execute(
                    select(func.max(Organization.name)).where(Organization.name.startswith(prefix))
                ).scalar()
            assert latest == f"{prefix}{i:02}"
            with database.reading() as session:
                seen = session.scalar(select(func.count()).where(Organization.name.startswith(prefix)))
            assert seen == i + 1

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(write_then_read, thread) for thread in range(4)]:
            future.result(timeout=120)


def _unescape_copy_field(field: str) -> str | None:
    """PostgreSQL's reading of a COPY text-format field (its documented backslash sequences)."""
    if field == "\\N":
        return None
    out, i = [], 0
    sequences = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", "b": "\b", "f": "\f", "v": "\v"}
    while i < len(field):
        if field[i] == "\\":
            out.append(sequences.get(field[i + 1], field[i + 1]))
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


@given(st.text())
def test_copy_text_round_trips_and_leaves_no_raw_separator(text: str) -> None:
    """`store.copy_text` (the layer and event-log COPY writers): what PostgreSQL reads back is the
    text written, and no raw tab, newline or CR is left to split a field or a row."""
    field = copy_field(text)
    assert not {"\t", "\n", "\r"} & set(field)
    assert _unescape_copy_field(field) == text
    assert copy_text(text) == field


def test_copy_field_writes_null_booleans_and_numbers_as_postgresql_reads_them() -> None:
    assert [copy_field(v) for v in (None, True, False, 7, "\\N")] == ["\\N", "t", "f", "7", "\\\\N"]
    assert copy_field(datetime(2026, 11, 27, 9, 5, 1, 123000)) == "2026-11-27 09:05:01.123000"
