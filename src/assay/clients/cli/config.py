"""Where the CLI's API key and base URL come from, most specific first: the `--api-key` /
`--base-url` flags, then `ASSAY_API_KEY` / `ASSAY_BASE_URL`, then the config file written by
`assay auth set-key` (`$ASSAY_CONFIG`, else `$XDG_CONFIG_HOME/assay/config.json`, else
`~/.config/assay/config.json`, mode 0600), then the default URL `http://127.0.0.1:8400`.

Also the one place an SDK error becomes the CLI's `error: …` line and exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from assay.client import Assay

DEFAULT_BASE_URL = "http://127.0.0.1:8400"
"""`assay.client.DEFAULT_BASE_URL`, repeated: importing the SDK (httpx) here would slow every
`assay` start-up, `assay verify` included."""

__all__ = [
    "DEFAULT_BASE_URL",
    "ApiKeyOption",
    "AsJson",
    "BaseUrlOption",
    "Credentials",
    "config_path",
    "connect",
    "print_json",
    "read_config",
    "resolve",
    "write_config",
]

ApiKeyOption = Annotated[
    str | None, typer.Option("--api-key", help="Org API key (else ASSAY_API_KEY, else `assay auth set-key`).")
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url", help=f"Assay API (else ASSAY_BASE_URL, else the config, else {DEFAULT_BASE_URL})."
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


@dataclass(frozen=True)
class Credentials:
    api_key: str | None
    key_source: str
    """`--api-key`, `ASSAY_API_KEY`, the config file's path, or `none`."""
    base_url: str
    url_source: str


def config_path() -> Path:
    if os.environ.get("ASSAY_CONFIG"):
        return Path(os.environ["ASSAY_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "assay" / "config.json"


def read_config() -> dict[str, Any]:
    path = config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        print(f"warning: ignoring unreadable config {path}: {exc}", file=sys.stderr)
        return {}
    return data if isinstance(data, dict) else {}


def write_config(changes: dict[str, Any]) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**read_config(), **changes}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.chmod(path, 0o600)
    return path


def resolve(api_key: str | None = None, base_url: str | None = None) -> Credentials:
    config = read_config()
    where = str(config_path())
    key_choices = [
        (api_key, "--api-key"),
        (os.environ.get("ASSAY_API_KEY"), "ASSAY_API_KEY"),
        (config.get("api_key"), where),
    ]
    url_choices = [
        (base_url, "--base-url"),
        (os.environ.get("ASSAY_BASE_URL"), "ASSAY_BASE_URL"),
        (config.get("base_url"), where),
    ]
    key, key_source = next(((v, s) for v, s in key_choices if v), (None, "none"))
    url, url_source = next(((v, s) for v, s in url_choices if v), (DEFAULT_BASE_URL, "default"))
    return Credentials(key, key_source, str(url).rstrip("/"), url_source)


@contextmanager
def connect(api_key: str | None = None, base_url: str | None = None) -> Iterator[Assay]:
    """An SDK client with the resolved credentials; any SDK error ends the command with exit 1."""
    from assay.client import APIConnectionError, Assay, AssayError

    credentials = resolve(api_key, base_url)
    if not credentials.api_key:
        print(
            "error: no API key: pass --api-key, set ASSAY_API_KEY, or run `assay auth set-key`",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    try:
        with Assay(api_key=credentials.api_key, base_url=credentials.base_url) as client:
            yield client
    except APIConnectionError:
        print(
            f"error: cannot reach the Assay API at {credentials.base_url} (is `assay serve` running?)",
            file=sys.stderr,
        )
        raise typer.Exit(1) from None
    except AssayError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        for key, messages in (exc.details or {}).items():
            print(
                f"  {key}: {'; '.join(map(str, messages)) if isinstance(messages, list) else messages}",
                file=sys.stderr,
            )
        raise typer.Exit(1) from None


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
