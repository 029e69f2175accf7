"""The SFTP server (asyncssh): one listener, each task run's password chrooted to its own tree.

`SftpListener` accepts password logins only, looked up by a callable the service supplies
(`authenticate(username, password) -> FilesAccess | None`), and serves the `sftp` subsystem and
nothing else (no shell, exec, scp or forwarding). Each session sees its playground's tree
(`tree.py`) as `/`: ls, stat, get, put, mkdir, rmdir, rename, remove.

Refused with an SFTP status, the listener carrying on: a path that climbs above `/` (permission
denied), symlinks and hard links (permission denied), content over the per-file limit (failure,
at the write that crosses it), anything once the task run has ended (failure). An upload is
written aside and moved into the tree only when its handle is closed, inside the playground's
gate (`access.py`): a refused, abandoned (connection lost before close) or late upload leaves
nothing behind. Once a task run ends its open sessions are closed within `watch_interval`.

Password guessing is bounded: a connection is closed after its `max_auth_tries`-th wrong
password, and each wrong password from one source address is answered later than the last
(`auth_backoff`, doubling up to `auth_backoff_max`), over all its connections; a right password
is answered at once.

Storage calls block, so they run in worker threads; the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

import asyncssh

from assay.sandboxes.files.access import FilesAccess
from assay.sandboxes.files.sftp_session import SftpSession
from assay.store.faults import outage

__all__ = [
    "Authenticate",
    "SftpListener",
]

log = logging.getLogger("assay.sftp")

Authenticate = Callable[[str, str], "FilesAccess | None"]
"""(username, password) → the access of the task run they belong to, or None; may block."""


class _Login(asyncssh.SSHServer):
    """One SSH connection: password auth against the task runs' credentials."""

    def __init__(self, listener: SftpListener):
        self.listener = listener
        self.conn: asyncssh.SSHServerConnection | None = None
        self.failures = 0
        self.source = ""

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        peer = conn.get_extra_info("peername")
        self.source = str(peer[0]) if peer else ""
        self.listener._connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.listener._connections.discard(self.conn)
            self.listener._forget(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    async def validate_password(self, username: str, password: str) -> bool:
        try:
            access = await asyncio.to_thread(self.listener.authenticate, username, password)
        except Exception as exc:
            dependency = outage(exc)
            if dependency is None:
                log.exception("SFTP login lookup for %r failed", username)
                return False  # our failure, not a wrong password: no backoff
            # Not "wrong password": the client is told the service is down for now.
            log.warning("SFTP login for %r refused, the %s is unavailable: %s", username, dependency, exc)
            raise asyncssh.ServiceNotAvailable(f"the {dependency} is unavailable: retry later") from None
        if access is None or self.conn is None:
            await self._refuse()
            return False
        self.conn.set_extra_info(assay_access=access)
        self.listener._track(access, self.conn)
        return True

    async def _refuse(self) -> None:
        """A wrong password is answered late (the source's backoff), and the connection's last
        allowed one closes it, as OpenSSH's `MaxAuthTries` does: guessing costs time per source,
        however many connections the guesses are spread over; a right password never waits."""
        self.failures += 1
        await asyncio.sleep(self.listener._failed_login(self.source))
        if self.conn is not None and self.failures >= self.listener.max_auth_tries:
            self.conn.disconnect(
                asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "too many authentication failures"
            )


class _Backoff:
    """Wrong passwords per source address, each answered `base`·2^(n−1) seconds (at most `ceiling`)
    after the previous one's answer from that address; forgotten after `forget` quiet seconds.
    Bounded: past `MAX_SOURCES` addresses the quietest is forgotten first."""

    MAX_SOURCES = 10_000

    def __init__(self, base: float, ceiling: float, forget: float = 600.0):
        self.base, self.ceiling, self.forget = base, ceiling, forget
        self._sources: OrderedDict[str, tuple[int, float]] = OrderedDict()
        """Address → (wrong passwords counted, when the latest may be answered: monotonic)."""

    def wait(self, source: str) -> float:
        """Count a wrong password from `source`; the seconds before it may be answered."""
        now = time.monotonic()
        failures, due = self._sources.pop(source, (0, now))
        if now - due > self.forget:
            failures, due = 0, now
        failures += 1
        delay = min(self.base * 2 ** min(failures - 1, 30), self.ceiling) if self.base > 0 else 0.0
        due = max(due, now) + delay
        self._sources[source] = (failures, due)
        while len(self._sources) > self.MAX_SOURCES:
            self._sources.popitem(last=False)
        return due - now


class SftpListener:
    """The deployment's one SFTP listener (docs/sandboxes.md); `start` returns the port it bound."""

    def __init__(
        self,
        authenticate: Authenticate,
        host_key: asyncssh.SSHKey | Callable[[], asyncssh.SSHKey],
        *,
        host: str = "",
        port: int = 2222,
        watch_interval: float = 1.0,
        prepare: Callable[[], object] | None = None,
        max_auth_tries: int = 6,
        auth_backoff: float = 0.5,
        auth_backoff_max: float = 10.0,
    ):
        self.authenticate = authenticate
        self.prepare = prepare
        """Run first thing in `start` (the service opens its storage there: a bad URL fails the start)."""
        self._host_key = host_key
        self.host = host
        self.port = port
        self.watch_interval = watch_interval
        self.max_auth_tries = max(1, max_auth_tries)
        self._backoff = _Backoff(auth_backoff, auth_backoff_max)
        self._server: asyncssh.SSHAcceptor | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._sessions: dict[str, tuple[FilesAccess, set[asyncssh.SSHServerConnection]]] = {}
        self._connections: set[asyncssh.SSHServerConnection] = set()

    @property
    def host_key(self) -> asyncssh.SSHKey:
        """The key, loaded (or made) on first use: building a listener touches no disk."""
        if callable(self._host_key):
            self._host_key = self._host_key()
        return self._host_key

    @property
    def fingerprint(self) -> str:
        return str(self.host_key.get_fingerprint())

    async def start(self) -> int:
        if self.prepare is not None:
            await asyncio.to_thread(self.prepare)
        self._server = await asyncssh.listen(
            self.host or None,
            self.port,
            server_factory=lambda: _Login(self),
            server_host_keys=[self.host_key],
            sftp_factory=SftpSession,
            allow_scp=False,
            login_timeout=30,
            keepalive_interval=30,
            encoding=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._watcher = asyncio.create_task(self._watch())
        log.info("SFTP listening on port %d, host key %s", self.port, self.fingerprint)
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every connection (the seam's `Listener.stop`)."""
        await self.close()

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        connections = list(self._connections)
        for conn in connections:
            conn.close()
        for conn in connections:
            await conn.wait_closed()

    def _failed_login(self, source: str) -> float:
        return self._backoff.wait(source)

    def _track(self, access: FilesAccess, conn: asyncssh.SSHServerConnection) -> None:
        self._sessions.setdefault(access.key, (access, set()))[1].add(conn)

    def _forget(self, conn: asyncssh.SSHServerConnection) -> None:
        for key, (_, connections) in list(self._sessions.items()):
            connections.discard(conn)
            if not connections:
                del self._sessions[key]

    async def _watch(self) -> None:
        """Close the sessions of task runs that have ended (docs/api.md)."""
        while True:
            await asyncio.sleep(self.watch_interval)
            for key, (access, connections) in list(self._sessions.items()):
                try:
                    alive = await asyncio.to_thread(access.alive)
                except Exception:
                    log.exception("could not check whether %s still takes traffic", access.label)
                    continue
                if not alive:
                    for conn in list(connections):
                        conn.disconnect(asyncssh.DISC_BY_APPLICATION, "the task run has ended")
                    self._sessions.pop(key, None)
