"""The store's tests run on the service suite's real server and databases (SQLite and, with
ASSAY_TEST_POSTGRES_URL, PostgreSQL)."""

from __future__ import annotations

from tests.service.conftest import BOOTSTRAP_KEY, _postgres_database, _serve, api, server  # noqa: F401
