"""The docs' walkthroughs run against a real server: the service suite's fixtures."""

from __future__ import annotations

from tests.service.conftest import Server, _postgres_database, server  # noqa: F401  (fixtures)

__all__ = ["Server"]
