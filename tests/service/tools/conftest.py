"""Tool tests run against a real server (the service suite's fixtures) with the demo's benchmark
published; the agent clients' tests (`tests/clients/`) share the `front_office` fixture."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from assay.client import Assay
from assay.clients.demo import PACKAGE
from assay.clients.demo.runner import _for_this_build
from assay.clients.packages import push, read_package
from tests.service.conftest import Server


@pytest.fixture(scope="module")
def front_office(server: Server) -> Iterator[str]:
    """The demo's benchmark, published under a name of this module's own: `slug@version`."""
    package, _ = _for_this_build(read_package(PACKAGE))
    package = replace(package, name=f"Front office {uuid.uuid4().hex[:8]}")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id)
    yield f"{version.slug}@{version.version}"
