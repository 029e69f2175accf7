"""Core statements run on the driver's own connection: one transaction, no SQLAlchemy execution layer.

Why: on the MLLP listener's hot path (one commit per message, the ACK after it) SQLAlchemy's
per-statement machinery — connection and transaction objects, events, result wrapping — cost
about five times what SQLite spent running the statements (docs/performance.md, "MLLP").
`DriverTransaction` keeps what matters of it and drops the rest:

- statements are ordinary Core statements, compiled once per dialect (`compiled`), so the SQL,
  the placeholders and the column types are SQLAlchemy's own;
- every parameter goes through its column type's bind processor and every result column through
  its result processor (`TypeEngine.bind_processor`/`result_processor`), so a row written here
  reads back through the ORM exactly as one written by `Connection.execute`;
- the transaction is the one `Database` would open: on SQLite a turn in the process's write queue,
  then `BEGIN IMMEDIATE` (the write lock up front, as `store/database.py` does for every write),
  the turn given back once the COMMIT or ROLLBACK has run; the driver's implicit one on PostgreSQL;
  commit on success, rollback on error, and a connection that failed mid-transaction is
  invalidated rather than handed back to the pool.

Only what a hot path needs: `execute(statement, params)` with a dict (one row) or a list of dicts
(`executemany`), and `first()`/`scalar()`/`all()` on the result, rows with attribute access.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from sqlalchemy import Dialect, Engine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from assay.store.errors import Busy
from assay.store.write_queue import end_turn, queue_of, take_turn

__all__ = ["DriverResult", "DriverTransaction", "compiled"]

_Processor = Callable[[Any], Any] | None


class _Compiled:
    """One statement for one dialect: SQL text, parameter order, bind and result processors."""

    __slots__ = ("defaults", "names", "positional", "processors", "results", "row", "sql", "statement")

    def __init__(self, statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None):
        self.statement = statement  # kept alive: the cache is keyed by its id
        compiler = statement.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        assert isinstance(compiler, SQLCompiler)
        self.sql = compiler.string
        self.positional = bool(compiler.positional)
        binds = compiler.binds
        self.names: tuple[str, ...] = tuple(compiler.positiontup or ()) if self.positional else tuple(binds)
        self.processors: dict[str, _Processor] = {}
        self.defaults: dict[str, Any] = {}
        for name in self.names:
            bind = binds[name]
            self.processors[name] = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if not bind.required:
                self.defaults[name] = bind.effective_value
        columns = getattr(statement, "selected_columns", None)
        if columns is not None:
            self.results: list[_Processor] = [
                column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
            ]
            keys = [column.key or f"_{i}" for i, column in enumerate(columns)]
            self.row: Any = namedtuple("Row", keys, rename=True)  # type: ignore[misc]
        else:
            self.results, self.row = [], None

    def parameters(self, given: dict[str, Any]) -> Any:
        values = []
        for name in self.names:
            value = given[name] if name in given else self.defaults[name]
            processor = self.processors[name]
            values.append(value if processor is None else processor(value))
        return values if self.positional else dict(zip(self.names, values, strict=True))


_CACHE: dict[tuple[int, str, tuple[str, ...] | None], _Compiled] = {}
_CACHE_LOCK = threading.Lock()


def compiled(
    statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None
) -> _Compiled:
    """`statement` compiled for `dialect` (once: statements on a hot path are module constants).
    An insert is compiled for the `column_keys` its rows carry."""
    key = (id(statement), dialect.name, tuple(column_keys) if column_keys else None)
    found = _CACHE.get(key)
    if found is None:
        with _CACHE_LOCK:
            found = _CACHE.get(key)
            if found is None:
                found = _CACHE[key] = _Compiled(statement, dialect, column_keys)
    return found


class DriverResult:
    """The rows a statement returned (all fetched), processed by their column types."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[Any]):
        self._rows = rows

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def all(self) -> list[Any]:
        return self._rows


class DriverTransaction:
    """`with DriverTransaction(engine) as tx:` — one transaction on a pooled driver connection.

    `tx.execute(statement, params)` takes the statement objects `Connection.execute` would; it
    commits when the block ends normally and rolls back when it raises.
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect
        self._sqlite = engine.dialect.name == "sqlite"
        self._pooled: Any = None
        self._cursor: Any = None

    def __enter__(self) -> DriverTransaction:
        queue = queue_of(self.engine) if self._sqlite else None
        self._pooled = self.engine.raw_connection()
        try:
            if queue is not None:  # as store/database.py's "begin" listener: in line, then the lock
                take_turn(self._pooled, queue)
            self._cursor = self._pooled.driver_connection.cursor()
            if self._sqlite:
                self._cursor.execute("BEGIN IMMEDIATE")
        except Busy:  # waited its turn in vain: the connection itself is fine
            self._pooled.close()
            raise
        except BaseException:
            end_turn(self._pooled)
            self._pooled.invalidate()
            self._pooled.close()
            raise
        return self

    def execute(
        self, statement: ClauseElement, params: dict[str, Any] | list[dict[str, Any]]
    ) -> DriverResult:
        many = isinstance(params, list)
        rows = params if isinstance(params, list) else [params]
        plan = compiled(statement, self.dialect, list(rows[0]) if many else None)
        if many and len(rows) > 1:
            self._cursor.executemany(plan.sql, [plan.parameters(row) for row in rows])
            return DriverResult([])
        self._cursor.execute(plan.sql, plan.parameters(rows[0]))
        if plan.row is None:
            return DriverResult([])
        results = plan.results
        fetched = self._cursor.fetchall()
        return DriverResult(
            [
                plan.row(*(v if p is None else p(v) for v, p in zip(raw, results, strict=True)))
                for raw in fetched
            ]
        )

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        pooled, cursor = self._pooled, self._cursor
        self._pooled = self._cursor = None
        connection = pooled.driver_connection
        try:
            if kind is None:
                if self._sqlite:
                    cursor.execute("COMMIT")
                else:
                    connection.commit()
                return
            if self._sqlite:
                if connection.in_transaction:
                    cursor.execute("ROLLBACK")
            else:
                connection.rollback()
        except BaseException:
            # A connection that cannot end its transaction is not handed to the next caller.
            pooled.invalidate()
            raise
        finally:
            cursor.close()
            end_turn(pooled)
            pooled.close()
