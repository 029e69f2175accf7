"""The surfaces' settings reach them under the variable names deployments use (docs/deployment.md),
though each surface declares its own section and the service's settings name none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from assay.judge import DEFAULT_MODEL, DEFAULT_TIMEOUT
from assay.sandboxes import SURFACES
from assay.sandboxes.options import variable_of
from assay.service.listeners import ListenerSupervisor, open_settings_deployment
from assay.service.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs"

DOCUMENTED: list[tuple[str, str, str, str, Any]] = [
    # variable, value set, surface, option key, what the surface reads
    ("ASSAY_MLLP_PORT", "3575", "hl7", "port", 3575),
    ("ASSAY_MLLP_IDLE_TIMEOUT", "12.5", "hl7", "idle_timeout", 12.5),
    ("ASSAY_MLLP_FRAME_TIMEOUT", "0.25", "hl7", "frame_timeout", 0.25),
    ("ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE", "7", "hl7", "max_per_source", 7),
    ("ASSAY_SFTP_PORT", "3222", "files", "port", 3222),
    ("ASSAY_SFTP_MAX_AUTH_TRIES", "4", "files", "max_auth_tries", 4),
    ("ASSAY_SFTP_AUTH_BACKOFF", "0.1", "files", "auth_backoff", 0.1),
    ("ASSAY_SFTP_AUTH_BACKOFF_MAX", "2", "files", "auth_backoff_max", 2.0),
    ("ASSAY_STORAGE_URL", "s3://bucket/prefix", "files", "storage_url", "s3://bucket/prefix"),
    ("ASSAY_STORAGE_OPTIONS", '{"anon": true}', "files", "storage_options", '{"anon": true}'),
    ("ASSAY_MAX_FILE_BYTES", "1024", "files", "max_file_bytes", 1024),
    ("ASSAY_FHIR_URL", "http://fhir.test/fhir", "fhir", "url", "http://fhir.test/fhir"),
    ("ASSAY_FHIR_ISOLATION", "hapi-partition", "fhir", "isolation", "hapi-partition"),
    ("ASSAY_FHIR_AUTHORIZATION", "Bearer t", "fhir", "authorization", "Bearer t"),
    ("ASSAY_FHIR_LENIENT", "1", "fhir", "lenient", True),
    ("ASSAY_FHIR_STRICT", "1", "fhir", "strict", True),
    ("ASSAY_PORTAL_SIGN_IN_FREE_FAILURES", "2", "portal", "sign_in_free_failures", 2),
    ("ASSAY_PORTAL_SIGN_IN_BACKOFF", "3", "portal", "sign_in_backoff", 3.0),
    ("ASSAY_PORTAL_SIGN_IN_BACKOFF_MAX", "30", "portal", "sign_in_backoff_max", 30.0),
    ("ASSAY_SIM_URL", "http://model.test/v1", "voice", "sim_url", "http://model.test/v1"),
    ("ASSAY_SIM_MODEL", "persona", "voice", "sim_model", "persona"),
    ("ASSAY_SIM_API_KEY", "sk-test", "voice", "sim_api_key", "sk-test"),
    ("ASSAY_SIM_TIMEOUT", "5", "voice", "sim_timeout", 5.0),
]


@pytest.mark.parametrize(("variable", "raw", "surface", "key", "expected"), DOCUMENTED)
def test_each_documented_variable_reaches_its_surface(
    variable: str, raw: str, surface: str, key: str, expected: Any
) -> None:
    settings = Settings.from_env({variable: raw})
    deployment = open_settings_deployment(create_engine("sqlite://"), settings)
    assert deployment.option(surface, key) == expected
    assert variable_of(surface, key, SURFACES[surface].options[key]) == variable
    pages = (DOCS / "deployment.md").read_text() + (DOCS / "sandboxes.md").read_text()
    assert variable in pages or variable.rsplit("_", 1)[0] + "_*" in pages


def test_unset_variables_leave_each_surface_its_defaults() -> None:
    options = Settings.from_env({}).surface_options
    assert options["hl7"] == {
        "port": 2575,
        "idle_timeout": 300.0,
        "frame_timeout": 60.0,
        "max_per_source": 64,
    }
    assert (options["files"]["port"], options["files"]["max_file_bytes"]) == (2222, 25 * 1024 * 1024)
    assert (options["fhir"]["url"], options["fhir"]["isolation"]) == (None, "tag")
    assert options["portal"]["sign_in_free_failures"] == 5
    assert (options["voice"]["sim_model"], options["voice"]["sim_timeout"]) == (
        DEFAULT_MODEL,
        DEFAULT_TIMEOUT,
    )
    assert Settings().listener_ports == {"hl7": 2575, "files": 2222}


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"ASSAY_SFTP_PORT": "twenty"}, "ASSAY_SFTP_PORT must be an integer, got 'twenty'"),
        (
            {"ASSAY_PORTAL_SIGN_IN_BACKOFF": "-1"},
            "ASSAY_PORTAL_SIGN_IN_BACKOFF must not be negative, got -1.0",
        ),
        ({"ASSAY_SIM_URL": "model.test"}, "ASSAY_SIM_URL must be an http\\(s\\) URL"),
        ({"ASSAY_SIM_TIMEOUT": "0"}, "ASSAY_SIM_TIMEOUT must be > 0"),
        ({"ASSAY_FHIR_ISOLATION": "per-tenant"}, "ASSAY_FHIR_ISOLATION must be one of tag, "),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(environment: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env(environment)


def test_settings_for_what_is_not_a_surface_or_not_its_option_are_refused() -> None:
    with pytest.raises(ValueError, match="'fax', which is not a surface"):
        Settings(surface_settings={"fax": {"port": 1}})
    with pytest.raises(ValueError, match="surface 'hl7' has no option 'listen'"):
        Settings(surface_settings={"hl7": {"listen": 1}})
    with pytest.raises(ValueError, match="ASSAY_MLLP_PORT must be of type int, got 'x'"):
        Settings(surface_settings={"hl7": {"port": "x"}})


def test_the_workers_of_serve_are_told_the_bound_ports_under_the_same_variables() -> None:
    """`serve --workers N`: the listener process's bound ports reach the workers as
    `ASSAY_MLLP_PORT` and `ASSAY_SFTP_PORT`, which their `Settings.from_env` reads back."""
    supervisor = ListenerSupervisor(Settings().with_free_ports())
    supervisor.ports = {"hl7": 40001, "files": 40002}
    told = supervisor.worker_environment()
    assert told == {"ASSAY_LISTENERS": "0", "ASSAY_MLLP_PORT": "40001", "ASSAY_SFTP_PORT": "40002"}
    worker = Settings.from_env(told)
    assert worker.listeners is False and worker.listener_ports == {"hl7": 40001, "files": 40002}


def test_a_value_set_in_code_is_kept_beside_the_others_of_its_surface() -> None:
    settings = Settings.from_env({"ASSAY_MLLP_PORT": "0", "ASSAY_MLLP_IDLE_TIMEOUT": "9"})
    changed = settings.with_surface_settings({"hl7": {"frame_timeout": 1.5}})
    assert changed.surface_options["hl7"] == {
        "port": 0,
        "idle_timeout": 9.0,
        "frame_timeout": 1.5,
        "max_per_source": 64,
    }
