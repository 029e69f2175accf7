"""The `assay` command (docs/deployment.md)."""

from __future__ import annotations

from assay.clients.cli.app import app, main

__all__ = ["app", "main"]
