"""The SFTP server's host key: made once, kept in the data dir, the same after every restart.

An agent's SSH client pins the fingerprint it saw first (`known_hosts`); a key made anew at each
start would make every client refuse the server after a restart, or train agents to turn host
checking off.
"""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh

__all__ = ["HOST_KEY_FILE", "load_host_key"]

HOST_KEY_FILE = "sftp_host_key"


def load_host_key(data_dir: Path) -> asyncssh.SSHKey:
    """The key at `<data_dir>/sftp_host_key`, made (ed25519, mode 0600) when there is none.

    Two processes starting at once both end up with the key that was linked in first: each writes
    its own to a private temporary name and `os.link`s it into place, which fails when taken.
    """
    path = data_dir / HOST_KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        key = asyncssh.generate_private_key("ssh-ed25519")
        temporary = data_dir / f".{HOST_KEY_FILE}.{os.getpid()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(key.export_private_key())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink(missing_ok=True)
    return asyncssh.read_private_key(str(path))
