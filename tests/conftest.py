"""Shared test helpers: where the bundled fixtures live (provenance in tests/fixtures/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES
