"""A fast reader for the snapshot tar.gz archives Assay writes, with `tarfile` as the authority.

`tarfile` parses every member in Python at several microseconds a header (`nti` per number field,
two checksum sums through `struct`, a `TarInfo` and a seek per member); at 137k FHIR resources
that was a third of `assay verify`. This reader inflates the gzip stream in large
chunks and reads the headers `archive_snapshot` writes — ustar headers in the canonical layout,
and pax extended headers holding only `mtime`/`path` (and fields the snapshot never reads) — and
raises `Unusual` at anything else. The caller then reads the whole archive again with `tarfile`,
so for any archive this reader accepts it yields exactly the members `tarfile` iterates, in the
same order, with the same names, sizes, mtimes and data; everything else is `tarfile`'s to decide.

Accepted: a gzip stream (RFC 1952, one member), then headers whose number fields are zero-padded
octal ending in NUL (`%07o\\0`, `%011o\\0`; the checksum `%06o\\0 ` and equal to the unsigned sum,
which is what Python's `tarfile` and GNU tar write), no ustar `prefix`, type `0` or NUL (a regular
file, or a directory when the name ends in `/`), `5` (a directory) or `x` (a pax header, strictly
formed, before a regular file or a directory), up to the first all-zero block. Refused (`Unusual`):
other types (links, devices, GNU long names, global pax headers), base-256 or space-padded
numbers, a signed checksum, pax records this reader does not apply (`size`, `linkpath`,
`hdrcharset`, `GNU.sparse.*`, ...), a stream that ends or breaks (zlib error, CRC) before the
zero block, several gzip members.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Callable
from typing import BinaryIO, TypeVar

__all__ = ["GZIP_MAGIC", "Unusual", "read_members"]

GZIP_MAGIC = b"\x1f\x8b"
BLOCK = 512
_ZEROS = bytes(BLOCK)
_READ = 256 * 1024
"""Compressed bytes read per call: the decompressor keeps its unconsumed input, and a large one
(the whole file) is copied again on every call that stops at `_CHUNK` output."""
_CHUNK = 4 * 1024 * 1024
"""Decompressed bytes per inflate call."""
_ENCODING = sys.getfilesystemencoding()
"""What `tarfile.open` decodes header names with by default (`tarfile.ENCODING`)."""

# Bytes 100..346 of a header: mode, uid, gid (7 octal digits + NUL), size and mtime (11 + NUL), the
# checksum (6 + NUL + space), the type, linkname/magic/version/uname/gname (172 bytes, not read),
# devmajor/devminor (7 octal digits + NUL, or all NUL) and a NUL first byte of the ustar prefix.
_NUMBERS = re.compile(
    rb"[0-7]{7}\0[0-7]{7}\0[0-7]{7}\0([0-7]{11})\0([0-7]{11})\0([0-7]{6})\0 ([0\x005x])"
    rb"(?s:.{172})(?:[0-7]{7}\0|\0{8}){2}\0"
)
_PAX_IGNORED = frozenset({"atime", "ctime", "uid", "gid", "uname", "gname"})
"""pax keys `tarfile` applies (or keeps) that no snapshot member's reading looks at; a key outside
these and `mtime`/`path` makes the archive `tarfile`'s."""

_PAX_MAX = 1024 * 1024
"""A larger pax header is `tarfile`'s to read (Assay's hold one or two short records)."""

T = TypeVar("T")

Accept = Callable[[str, int], str]
"""Called for each regular member before its data is read: (name, size) -> the key to store it
under; it may raise to refuse the archive."""


class Unusual(Exception):
    """The archive holds something this reader leaves to `tarfile`."""


class _Inflated:
    """The decompressed stream, read forward in slices."""

    def __init__(self, handle: BinaryIO):
        self._handle = handle
        self._inflate = zlib.decompressobj(wbits=31)  # gzip wrapper only; CRC and size checked
        self._buffer = b""
        self._pos = 0

    def _more(self) -> bytes:
        inflate = self._inflate
        while True:
            if inflate.eof:
                raise Unusual("the gzip stream ends before the archive does")
            data = inflate.unconsumed_tail or self._handle.read(_READ)
            if not data:
                raise Unusual("the gzip stream is truncated")
            try:
                out = inflate.decompress(data, _CHUNK)
            except zlib.error as exc:
                raise Unusual(f"zlib: {exc}") from None
            if out:
                return out

    def take(self, size: int, skip: int = 0) -> bytes:
        """The next `size` bytes, then `skip` more passed over."""
        start = self._pos
        end = start + size
        if end + skip <= len(self._buffer):
            self._pos = end + skip
            return self._buffer[start:end]
        data = self._take(size)
        if skip:
            self.skip(skip)
        return data

    def _take(self, size: int) -> bytes:
        start = self._pos
        end = start + size
        if end <= len(self._buffer):
            self._pos = end
            return self._buffer[start:end]
        # Across chunks: the slice is joined and the last chunk becomes the buffer (no chunk copied).
        parts = [self._buffer[start:]]
        short = size - len(parts[0])
        while True:
            more = self._more()
            if len(more) >= short:
                break
            parts.append(more)
            short -= len(more)
        parts.append(more[:short])
        self._buffer = more
        self._pos = short
        return b"".join(parts)

    def skip(self, size: int) -> None:
        if self._pos + size <= len(self._buffer):
            self._pos += size
        else:
            self._take(size)


def _padding(size: int) -> int:
    return -size % BLOCK


def _checksum(header: bytes) -> int:
    """The unsigned header checksum (the checksum field counted as 8 spaces). Adler-32's low half
    is 1 + the byte sum mod 65521, and 256 bytes sum to at most 65,280: each half's is exact."""
    return (
        (zlib.adler32(header[:256]) & 0xFFFF)
        + (zlib.adler32(header[256:]) & 0xFFFF)
        - 2
        - sum(header[148:156])
        + 256
    )


def _header(header: bytes) -> tuple[str, bytes, int, int]:
    """(name, type, size, mtime) of a canonical header; `Unusual` for any other."""
    found = _NUMBERS.fullmatch(header, 100, 346)
    if found is None:
        raise Unusual("a header this reader does not read")
    size_field, mtime_field, checksum_field, kind = found.groups()
    if int(checksum_field, 8) != _checksum(header):
        raise Unusual("a header checksum this reader does not check")
    end = header.find(b"\0", 0, 100)
    name = header[: end if end >= 0 else 100].decode(_ENCODING, "surrogateescape")
    if kind == b"\0" and name.endswith("/"):
        kind = b"5"  # tarfile: an old-style directory
    return name, kind, int(size_field, 8), int(mtime_field, 8)


def _pax(records: bytes) -> dict[str, str]:
    """A pax extended header's records, strictly `"%d %s=%s\\n"` end to end; `Unusual` otherwise
    (`tarfile` reads looser forms, and this reader must read what it reads)."""
    found: dict[str, str] = {}
    pos = 0
    while pos < len(records):
        space = records.find(b" ", pos)
        digits = records[pos:space]
        if space < 0 or not digits or not digits.isdigit():
            raise Unusual("a pax record this reader does not read")
        end = pos + int(digits)
        equals = records.find(b"=", space + 1, end)
        if end > len(records) or equals <= space + 1 or records[end - 1 : end] != b"\n":
            raise Unusual("a pax record this reader does not read")
        keyword = records[space + 1 : equals].decode("utf-8", "surrogateescape")
        if keyword not in ("path", "mtime") and keyword not in _PAX_IGNORED:
            raise Unusual(f"pax record {keyword!r}")
        found[keyword] = records[equals + 1 : end - 1].decode("utf-8", "surrogateescape")
        pos = end
    return found


def read_members(
    handle: BinaryIO, accept: Accept, when: Callable[[int | float], T]
) -> dict[str, tuple[bytes, T]]:
    """Every regular member of the tar.gz `handle` by the key `accept` gives it, with its data and
    `when(mtime)` (called once per distinct mtime), in archive order (a later member of the same
    key replaces an earlier one's value), directories skipped. `Unusual` when the archive is not
    one this reader reads the way `tarfile` does."""
    if handle.read(2) != GZIP_MAGIC:
        raise Unusual("not gzip")
    handle.seek(0)
    stream = _Inflated(handle)
    take = stream.take
    stamps: dict[int | float, T] = {}
    members: dict[str, tuple[bytes, T]] = {}
    while True:
        header = take(BLOCK)
        if header == _ZEROS:
            return members
        name, kind, size, mtime = _header(header)
        stamp: int | float = mtime
        if kind == b"x":
            if size > _PAX_MAX:
                raise Unusual("a large pax header")
            block = take(size + _padding(size))
            if b"hdrcharset=" in block or block[size:].count(0) != len(block) - size:
                raise Unusual("pax hdrcharset, or pax padding that is not NUL")
            pax = _pax(block[:size])
            name, kind, size, mtime = _header(take(BLOCK))
            if kind == b"x":
                raise Unusual("a pax header after a pax header")
            stamp = mtime
            if "path" in pax:
                name = pax["path"].rstrip("/")
            if "mtime" in pax:
                try:
                    stamp = float(pax["mtime"])
                except ValueError:
                    stamp = 0
        if kind == b"5":
            continue  # tarfile reads no data blocks after a directory's header, whatever its size
        key = accept(name, size)
        converted = stamps.get(stamp)
        if converted is None:
            converted = stamps[stamp] = when(stamp)
        members[key] = (take(size, -size % BLOCK), converted)
