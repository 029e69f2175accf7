"""What can go wrong with a file operation, as one tree each surface maps once.

    FilesError                 a refused operation; nothing was changed
    ├── BadPath                 the path cannot be held (escape, control character, too long)
    ├── FileMissing             no file or folder at the path (or its folder is missing)
    ├── NotAFolder              a path segment names a file where a folder is needed
    ├── IsAFolder               a file operation on a folder
    ├── AlreadyExists           the target of a create or a rename is taken
    ├── FolderNotEmpty          rmdir of a folder with something in it
    ├── TooLarge                content over the per-file limit (docs/sandboxes.md: 25 MB by default)
    ├── Unsupported             symlinks, hard links and other operations the tree has no room for
    └── SurfaceClosed           the task run ended: its surfaces take no traffic (docs/api.md)

The SFTP server answers each with a status code (`sftp.py::_status`), the files API with a 4xx
(`service/sandboxes/files.py`). `StorageError` (storage.py) is separate: it stops the start-up.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExists",
    "BadPath",
    "FileMissing",
    "FilesError",
    "FolderNotEmpty",
    "IsAFolder",
    "NotAFolder",
    "SurfaceClosed",
    "TooLarge",
    "Unsupported",
]


class FilesError(Exception):
    """A refused file operation; the message names the path."""


class BadPath(FilesError, ValueError):
    """A path the file tree cannot hold (`paths.clean_path`); the message says why."""


class FileMissing(FilesError):
    pass


class NotAFolder(FilesError):
    pass


class IsAFolder(FilesError):
    pass


class AlreadyExists(FilesError):
    pass


class FolderNotEmpty(FilesError):
    pass


class TooLarge(FilesError):
    pass


class Unsupported(FilesError):
    pass


class SurfaceClosed(FilesError):
    pass
