"""Paths inside a playground's file tree: one normal form, and the names it refuses.

Every path an agent sends — an SFTP request, a files API URL, a scenario step — goes through
`clean_path` once, where it enters. The normal form is relative, `/`-separated, without `.` or
empty segments: `inbox/referral.json`. The root is `""`. A `..` is resolved against the
segments before it; one that would climb above the root is refused rather than clamped (OpenSSH's
chroot clamps `/../etc` to `/etc`; an agent that writes there has a bug worth seeing), so the
SFTP server answers with a failure status and the API with 400 instead of quietly writing
somewhere else. A leading `/` means the playground's root (the chroot): an absolute path can
never name anything outside it.
"""

from __future__ import annotations

from assay.sandboxes.files.errors import BadPath

__all__ = ["MAX_PATH_BYTES", "MAX_SEGMENT_BYTES", "BadPath", "clean_path", "parent_of"]

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255


def clean_path(raw: str | bytes) -> str:
    """The normal form of `raw`, relative to the playground's root; `BadPath` when refused.

    Refused: bytes that are not UTF-8, control characters (NUL included: PostgreSQL text holds no
    NUL, and a name with a newline breaks every listing), `..` above the root, a path longer than
    1024 bytes or a segment longer than 255 (the common filesystem limits).
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadPath(f"path {raw!r} is not UTF-8") from None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in raw):
        raise BadPath(f"path {raw!r} holds a control character")
    segments: list[str] = []
    for segment in raw.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise BadPath(f"path {raw!r} climbs above the root of the file tree")
            segments.pop()
            continue
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise BadPath(f"path {raw!r} has a name longer than {MAX_SEGMENT_BYTES} bytes")
        segments.append(segment)
    path = "/".join(segments)
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise BadPath(f"path {raw!r} is longer than {MAX_PATH_BYTES} bytes")
    return path


def parent_of(path: str) -> str:
    """The folder holding `path` (normal form); `""` for the root and its children."""
    return path.rsplit("/", 1)[0] if "/" in path else ""
