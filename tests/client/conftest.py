"""The SDK is tested against a real server: the service suite's uvicorn-in-a-thread fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assay.client import Assay
from tests.service.conftest import Server, _postgres_database, server  # noqa: F401  (fixtures)

__all__ = ["Server"]


@pytest.fixture
def assay(server: Server) -> Iterator[Assay]:  # noqa: F811
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        yield client
