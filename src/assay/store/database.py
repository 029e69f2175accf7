"""Engine, sessions, migrations: one `Database` per app instance (no module-level engine).

Embedded default: SQLite in the data directory, WAL mode. On SQLite every transaction starts with
`BEGIN IMMEDIATE` and, inside one process, behind one lock: SQLite has one writer at a time anyway,
and taking the write lock up front means a transaction never fails half-way on an upgrade from
reader to writer (SQLITE_BUSY_SNAPSHOT) — the SQLite equivalent of the row locks PostgreSQL gets
from `SELECT … FOR UPDATE`. Several processes on one SQLite file wait on `busy_timeout`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["Database", "sqlite_url"]

_MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_KEY = 0x4153_5341  # "ASSA": one advisory lock id for schema upgrades
_POOL_SIZE = 10


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'assay.db').resolve()}"


class Database:
    """A SQLAlchemy engine plus the transaction discipline of its backend."""

    def __init__(self, url: str | URL):
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.engine = self._create_engine()
        self._write_lock: threading.Lock | None = threading.Lock() if self.is_sqlite else None
        self.sessions = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)

    def _create_engine(self) -> Engine:
        if not self.is_sqlite:
            return create_engine(
                self.url, pool_size=_POOL_SIZE, max_overflow=2 * _POOL_SIZE, pool_recycle=1800
            )
        if self.url.database:
            Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            self.url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=_POOL_SIZE,
            max_overflow=_POOL_SIZE,
        )

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One unit of work: commit on success, roll back on error (one commit per request)."""
        with self._write_lock or nullcontext():
            session = self.sessions()
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
            finally:
                session.close()

    def migrate(self) -> None:
        """Upgrade the schema to every head; safe when several workers start at once."""
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        with self._write_lock or nullcontext(), self.engine.begin() as connection:
            if not self.is_sqlite:
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            config.attributes["connection"] = connection
            command.upgrade(config, "heads")  # surfaces add migrations side by side (architecture.md)

    def dispose(self) -> None:
        self.engine.dispose()
