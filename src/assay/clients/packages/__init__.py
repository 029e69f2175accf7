"""Benchmark packages (docs/benchmark-packages.md): a folder that holds one benchmark, read and
written here (`folder.py`) and mirrored to an Assay server through the SDK (`sync.py`)."""

from __future__ import annotations

from assay.clients.packages.folder import Package, PackageError, read_package, write_package
from assay.clients.packages.sync import PushReport, pull, push

__all__ = ["Package", "PackageError", "PushReport", "pull", "push", "read_package", "write_package"]
