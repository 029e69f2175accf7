"""The `files` surface: playground file trees on fsspec storage, an SFTP server, the sidecar.

`storage.py` (where files live, checked at start-up), `tree.py` (one playground's tree and its
snapshot sidecar), `paths.py` (the one normal form of a path), `access.py` (gate, liveness and
event sink shared by both surfaces), `sftp.py` (the asyncssh listener), `sftp_session.py` (one
SFTP session's requests on the tree), `hostkey.py`.
"""

from assay.sandboxes.files.access import FileEvent, FilesAccess
from assay.sandboxes.files.errors import (
    AlreadyExists,
    BadPath,
    FileMissing,
    FilesError,
    FolderNotEmpty,
    IsAFolder,
    NotAFolder,
    SurfaceClosed,
    TooLarge,
    Unsupported,
)
from assay.sandboxes.files.hostkey import load_host_key
from assay.sandboxes.files.paths import clean_path
from assay.sandboxes.files.sftp import SftpListener
from assay.sandboxes.files.storage import FileStorage, Staged, StorageError, open_storage, storage_settings
from assay.sandboxes.files.tree import Listing, PlaygroundFiles, record_of

__all__ = [
    "AlreadyExists",
    "BadPath",
    "FileEvent",
    "FileMissing",
    "FileStorage",
    "FilesAccess",
    "FilesError",
    "FolderNotEmpty",
    "IsAFolder",
    "Listing",
    "NotAFolder",
    "PlaygroundFiles",
    "SftpListener",
    "Staged",
    "StorageError",
    "SurfaceClosed",
    "TooLarge",
    "Unsupported",
    "clean_path",
    "load_host_key",
    "open_storage",
    "record_of",
    "storage_settings",
]
