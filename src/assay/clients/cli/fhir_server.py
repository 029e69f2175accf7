"""`assay fhir-server`: a standalone Assay FHIR R4 server with a store per tenant.

What `ASSAY_FHIR_ISOLATION=assay-store` points an Assay API at (`ASSAY_FHIR_URL=http://host:port`),
or a plain FHIR server for anything that wants stores created and dropped over HTTP.
The service is imported when the command runs, not when `assay` starts (see `serve.py`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DEFAULT_PORT", "fhir_server"]

DEFAULT_PORT = 8410


def fhir_server(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = DEFAULT_PORT,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL (sqlite:///… or postgresql+psycopg://…); default SQLite in ./.assay-fhir."
        ),
    ] = None,
) -> None:
    """Run a FHIR R4 server with a store per tenant: PUT/DELETE /stores/{id}, FHIR at /stores/{id}/fhir.

    Set ASSAY_FHIR_SERVER_TOKEN to require `Authorization: Bearer <token>` on every request.
    """
    from assay.service.fhir_server import create_fhir_server
    from assay.service.server import run
    from assay.store import sqlite_url

    url = database_url or os.environ.get("ASSAY_FHIR_SERVER_DATABASE_URL") or sqlite_url(Path(".assay-fhir"))
    guarded = "token required" if os.environ.get("ASSAY_FHIR_SERVER_TOKEN") else "no token: open to anyone"
    print(f"Assay FHIR server on http://{host}:{port}/stores/{{id}}/fhir  ({guarded})", file=sys.stderr)
    run(create_fhir_server(url), host=host, port=port)
