"""`assay auth set-key | status`: store the API key (and URL) for later commands, and show which
key and URL a command would use, where each came from, and whether the server accepts the key."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from assay.clients.cli.config import ApiKeyOption, AsJson, BaseUrlOption, print_json, resolve, write_config

__all__ = ["auth_app"]

auth_app = typer.Typer(help="The API key the other commands use.", no_args_is_help=True)


@auth_app.command("set-key")
def set_key(
    key: Annotated[str, typer.Argument(help="An org API key (vk_…), e.g. from `assay keys create`.")],
    base_url: BaseUrlOption = None,
) -> None:
    """Save KEY (and --base-url) in the config file, readable only by you."""
    changes = {"api_key": key, **({"base_url": base_url.rstrip("/")} if base_url else {})}
    path = write_config(changes)
    print(f"saved the key …{key[-4:]} in {path}", file=sys.stderr)


def _mask(key: str | None) -> str:
    return "none" if not key else f"{key[:3]}…{key[-4:]}"


@auth_app.command("status")
def status(api_key: ApiKeyOption = None, base_url: BaseUrlOption = None, as_json: AsJson = False) -> None:
    """Which key and URL are in use, from where, and whether the server accepts the key.
    Exit 1 when there is no key, the server refuses it, or it cannot be reached."""
    from assay.client import APIConnectionError, Assay, AssayError

    credentials = resolve(api_key, base_url)
    state = "missing"
    if credentials.api_key:
        try:
            with Assay(api_key=credentials.api_key, base_url=credentials.base_url, max_retries=1) as client:
                next(iter(client.benchmarks.list()), None)
            state = "valid"
        except APIConnectionError:
            state = "unreachable"
        except AssayError as exc:
            state = "rejected" if exc.code in ("UNAUTHORIZED", "FORBIDDEN") else f"error {exc.code}"
    body = {
        "api_key": _mask(credentials.api_key),
        "key_source": credentials.key_source,
        "base_url": credentials.base_url,
        "url_source": credentials.url_source,
        "status": state,
    }
    if as_json:
        print_json(body)
    else:
        print(f"key:    {body['api_key']}  (from {credentials.key_source})")
        print(f"server: {credentials.base_url}  (from {credentials.url_source})")
        print(f"status: {state}")
    if state != "valid":
        raise typer.Exit(1)
