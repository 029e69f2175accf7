"""A layer's rows as PostgreSQL COPY text, for `layers._RowWriter`'s copier."""

from __future__ import annotations

import re
from typing import Any

from assay.store.copy_text import copy_text

__all__ = ["copy_lines"]

_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")


def copy_lines(chunk: list[dict[str, Any]]) -> bytes:
    """`chunk` as COPY text-format lines in ``layers._ROW_COLUMNS` order. A body is orjson's compact
    output, which holds no raw tab, newline or CR (JSON escapes them inside strings), so only
    its backslashes are doubled; the key fields are escaped only when they hold one of those
    characters (the layer hash is hex). One formatted head per row: escaping each field through
    a function and a regex cost ~0.8 s of GIL time per 1,024-patient build, on the thread that
    competes with the one serialising the rows."""
    parts: list[bytes] = []
    append = parts.append
    for row in chunk:
        kind, ident = row["resource_type"], row["resource_id"]
        if _COPY_SPECIAL.search(kind) or _COPY_SPECIAL.search(ident):
            kind, ident = copy_text(kind), copy_text(ident)
        append(f"{row['layer_hash']}\t{kind}\t{ident}\t{row['position']}\t".encode())
        append(row["body"].replace(b"\\", b"\\\\"))
        append(b"\n")
    return b"".join(parts)
