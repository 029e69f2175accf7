"""The surface registry and the listener mechanism (`sandboxes/registry.py`, `listeners.py`)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from sqlalchemy import create_engine

import assay
from assay.core.state import SandboxState
from assay.core.surfaces import BUILT_IN, surface_names
from assay.sandboxes import registry
from assay.sandboxes.listeners import Listeners, has_listeners
from assay.sandboxes.surface import BaseSurface, Caching, Deployment, Lifecycle, Preparing, Surface
from assay.service.catalog.schemas import DatasetCreate


def test_each_registry_key_is_its_surfaces_name() -> None:
    assert registry.SURFACES
    for name, surface in registry.SURFACES.items():
        assert surface.name == name and isinstance(surface, Surface)


def test_dataset_types_and_steps_belong_to_one_surface_each() -> None:
    types = [s.dataset_type for s in registry.SURFACES.values() if s.dataset_type]
    assert len(types) == len(set(types)) and set(types) == set(registry.DATASET_TYPES)
    steps = [step for s in registry.SURFACES.values() for step in s.scenario_steps]
    assert len(steps) == len(set(steps)) and set(steps) == set(registry.SCENARIO_STEPS)


def test_a_bare_dataset_form_is_claimed_once_by_a_surface_with_a_dataset_type() -> None:
    assert registry.DATASET_FILES == {".fhir.json": "fhir", "/": "files"}

    class Clash(BaseSurface):
        name, dataset_type, dataset_files = "clash", "clash", ".fhir.json"

    class Untyped(BaseSurface):
        name, dataset_files = "untyped", ".untyped.json"

    with pytest.raises(ValueError, match=re.escape("'.fhir.json' is claimed by two surfaces")):
        registry.register(Clash())
    with pytest.raises(ValueError, match="declares dataset_files but no dataset_type"):
        registry.register(Untyped())
    assert set(registry.SURFACES) == BUILT_IN and registry.DATASET_FILES == {
        ".fhir.json": "fhir",
        "/": "files",
    }


def test_state_fields_are_sandbox_state_methods_owned_once() -> None:
    owned = [field for s in registry.SURFACES.values() for field in s.state_fields]
    assert len(owned) == len(set(owned))
    assert set(owned) <= {name for name in dir(SandboxState) if not name.startswith("_")}


class _Echo:
    """A listener: an asyncio TCP server that echoes one line."""

    def __init__(self, port: int):
        self.port, self.server = port, None

    async def start(self) -> int:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.readline())
            await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(echo, "127.0.0.1", self.port)  # type: ignore[assignment]
        return int(self.server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class _EchoSurface(BaseSurface):
    name = "echo"

    def listener(self, deployment: Deployment) -> _Echo:
        return _Echo(deployment.port("echo", 0))


def test_listeners_start_once_and_report_the_bound_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # FHIR has no listener; the real ones (files: SFTP) bind their own ports and are tested with them.
    surfaces: Mapping[str, Surface] = {"fhir": registry.SURFACES["fhir"], "echo": _EchoSurface()}
    monkeypatch.setattr("assay.sandboxes.listeners.SURFACES", surfaces)
    deployment = Deployment(create_engine("sqlite://"), ports={"echo": 0, "hl7": 0, "files": 0})
    assert has_listeners(deployment)

    async def scenario() -> bytes:
        listeners = Listeners(deployment)
        ports = await listeners.start()
        assert ports["echo"] == deployment.ports["echo"] > 0
        reader, writer = await asyncio.open_connection("127.0.0.1", deployment.ports["echo"])
        writer.write(b"hello\n")
        answer = await reader.readline()
        writer.close()
        await listeners.stop()
        return answer

    assert asyncio.run(scenario()) == b"hello\n"


def test_every_list_of_surface_names_is_the_registrys() -> None:
    names = set(registry.SURFACES)
    assert BUILT_IN == names == surface_names()  # what `assay verify` knows without the registry
    enum = DatasetCreate.model_json_schema()["properties"]["type"]["enum"]
    assert enum == sorted(registry.DATASET_TYPES)
    # No `Literal[...]` in the source spells out the surfaces (more than half of them); a check that
    # reads a few surfaces may name those it reads.
    for module in Path(assay.__file__).parent.rglob("*.py"):
        for literal in re.findall(r"Literal\[([^\]]*)\]", module.read_text()):
            spelled = {name for name in names if f'"{name}"' in literal}
            assert len(spelled) <= len(names) // 2, (
                f"{module}: Literal[{literal}] lists surfaces; use the registry"
            )


def test_the_optional_protocols_are_opted_into_not_inherited() -> None:
    # The core seam carries what every surface needs; only the surfaces with something to keep,
    # prepare or cache take the optional hooks.
    assert set(registry.CACHING) == set(registry.PREPARING) == {"fhir"}
    assert set(registry.LIFECYCLE) == {"fhir", "voice", "portal"}
    assert not isinstance(BaseSurface(), Lifecycle | Preparing | Caching)
