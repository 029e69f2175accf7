"""PostgreSQL's `COPY … FROM STDIN` text format, written here for the bulk writers (the FHIR
layer rows, the event log's batches): psycopg's `write_row` formats each field through a Python
call, which was most of those writers' GIL time. One line per row, fields separated by
tabs, `\\N` for NULL."""

from __future__ import annotations

from typing import Any

__all__ = ["copy_field", "copy_text"]


def copy_text(text: str) -> str:
    """`text` as a COPY field: backslash, tab, newline and CR escaped. A JSON text holds no raw
    tab, newline or CR (JSON escapes them inside strings), so it costs one `replace`."""
    text = text.replace("\\", "\\\\")
    if "\n" in text or "\r" in text or "\t" in text:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def copy_field(value: Any) -> str:
    """A bound value as a COPY field: `\\N` for None, `t`/`f`, text escaped, anything else (an int,
    a naive datetime, which PostgreSQL reads in `str` form) as `str` gives it."""
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, str):
        return copy_text(value)
    return str(value)
