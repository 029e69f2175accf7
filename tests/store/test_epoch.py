"""A read-only copy of an engine answers to the engine's change epoch: the agent path's caches
loaded through it go stale when a write through the engine commits."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from assay.store.database import Database, read_only, sqlite_url
from assay.store.epoch import epoch_of


def test_a_read_only_copy_has_its_engines_epoch(tmp_path: Path) -> None:
    database = Database(sqlite_url(tmp_path))
    try:
        epoch = epoch_of(database.engine)
        reader = read_only(database.engine)
        assert epoch_of(reader) is epoch and epoch_of(read_only(reader)) is epoch
        before = epoch.current("tr_key")
        assert before is not None
        with database.engine.begin() as connection:
            connection.execute(text("CREATE TABLE noted (id INTEGER)"))
        assert epoch_of(reader).current("tr_key") != before
    finally:
        database.dispose()
