"""Client tests run against a real server: the service suite's uvicorn-in-a-thread fixtures."""

from __future__ import annotations

from tests.service.conftest import Server, _postgres_database, server  # noqa: F401  (fixtures)
from tests.service.tools.conftest import front_office  # noqa: F401  (fixture)

__all__ = ["Server"]
