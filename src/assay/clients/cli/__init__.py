"""The `assay` command (SPEC §7)."""

from __future__ import annotations

from assay.clients.cli.app import app, main

__all__ = ["app", "main"]
