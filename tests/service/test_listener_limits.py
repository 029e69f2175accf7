"""The listeners' limits count time and sources, not silence, through real sockets and a real SSH
client, on a server started with small limits (`ASSAY_MLLP_FRAME_TIMEOUT`,
`ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE`, `ASSAY_SFTP_MAX_AUTH_TRIES`, `ASSAY_SFTP_AUTH_BACKOFF`):

- an MLLP sender that drips a frame a byte at a time, each byte well inside the idle timeout, is
  cut off once the frame has taken `frame_timeout`, and junk dripped between frames counts too;
- one source address holds at most `max_connections_per_source` MLLP connections; a closed one
  frees its place;
- one SSH connection gets `max_auth_tries` wrong passwords and is then closed, each wrong one is
  answered later than the last, and the right password still logs in at once.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from dataclasses import replace

import asyncssh
import paramiko
import pytest

from assay.service.settings import Settings
from tests.sandboxes.hl7.test_surface import adt, msa, start_hl7
from tests.service.builders import make_benchmark, make_dataset, ok

from .conftest import Server, _serve

FRAME_TIMEOUT = 0.6
IDLE_TIMEOUT = 5.0
PER_SOURCE = 3
AUTH_TRIES = 3
BACKOFF = 0.15


@pytest.fixture(scope="module")
def limited(server: Server) -> Iterator[Server]:
    """A second app on the shared database, with listeners of its own and small limits."""
    assert server.settings is not None
    settings = (
        replace(
            server.settings,
            listeners=True,
        )
        .with_free_ports()
        .with_surface_settings(
            {
                "hl7": {
                    "idle_timeout": IDLE_TIMEOUT,
                    "frame_timeout": FRAME_TIMEOUT,
                    "max_per_source": PER_SOURCE,
                },
                "files": {
                    "max_auth_tries": AUTH_TRIES,
                    "auth_backoff": BACKOFF,
                    "auth_backoff_max": BACKOFF * 2,
                },
            }
        )
    )
    for url, app in _serve(settings):
        yield Server(url, app.state.database, server.org_key, server.backend, app.state.tokens, settings)


def _closed_by_listener(sock: socket.socket, within: float) -> float:
    """Seconds until the listener closed `sock` (reads until EOF or a reset)."""
    began = time.monotonic()
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - began


def test_settings_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "ASSAY_MLLP_FRAME_TIMEOUT": "0.25",
            "ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE": "7",
            "ASSAY_SFTP_MAX_AUTH_TRIES": "4",
            "ASSAY_SFTP_AUTH_BACKOFF": "0.1",
            "ASSAY_SFTP_AUTH_BACKOFF_MAX": "2",
        }
    )
    assert settings.surface_options["hl7"]["frame_timeout"] == 0.25
    assert settings.surface_options["hl7"]["max_per_source"] == 7
    files = settings.surface_options["files"]
    assert (files["max_auth_tries"], files["auth_backoff"], files["auth_backoff_max"]) == (4, 0.1, 2.0)
    with pytest.raises(ValueError, match="ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE"):
        Settings.from_env({"ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE": "many"})


def test_a_dripped_mllp_frame_is_cut_off_after_the_frame_timeout(limited: Server) -> None:
    with limited.client() as api:
        started = start_hl7(limited, api)
    message = b"\x0b" + adt(started.facility, "DRIP-1").encode() + b"\x1c\x0d"
    with socket.create_connection(("127.0.0.1", started.port), timeout=10) as sock:
        began = time.monotonic()
        closed = False
        for byte in message:  # one byte every 0.1 s: never idle, the frame never done in time
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.1)
            if time.monotonic() - began > FRAME_TIMEOUT * 4:
                break
        if not closed:
            _closed_by_listener(sock, IDLE_TIMEOUT)
        took = time.monotonic() - began
    assert FRAME_TIMEOUT * 0.9 <= took < IDLE_TIMEOUT, f"the connection stayed {took:.2f}s"

    # junk between frames is dripped against the same clock
    with socket.create_connection(("127.0.0.1", started.port), timeout=10) as sock:
        began = time.monotonic()
        with pytest.raises(OSError):
            for _ in range(int(FRAME_TIMEOUT * 4 / 0.1)):
                sock.sendall(b"j")
                time.sleep(0.1)
            raise AssertionError("junk kept the connection open")
        assert time.monotonic() - began < IDLE_TIMEOUT

    # a sender that completes each frame in time keeps its connection across many frames
    with socket.create_connection(("127.0.0.1", started.port), timeout=10) as sock:
        for n in range(3):
            sock.sendall(b"\x0b" + adt(started.facility, f"PROMPT-{n}").encode() + b"\x1c\x0d")
            answer = b""
            while not answer.endswith(b"\x1c\x0d"):
                answer += sock.recv(65536)
            assert msa(answer)[0] == "AA"
            time.sleep(FRAME_TIMEOUT * 1.2)  # silence between frames is the idle timeout's


def _answer(sock: socket.socket) -> bytes:
    """The ACK the listener sent, or b"" when it closed the connection instead."""
    answer = b""
    try:
        while not answer.endswith(b"\x1c\x0d"):
            chunk = sock.recv(65536)
            if not chunk:
                return b""
            answer += chunk
    except ConnectionResetError:
        return b""
    return answer


def test_mllp_connections_per_source_are_capped(limited: Server) -> None:
    with limited.client() as api:
        started = start_hl7(limited, api)

    def send(sock: socket.socket, control: str) -> bytes:
        sock.sendall(b"\x0b" + adt(started.facility, control).encode() + b"\x1c\x0d")
        return _answer(sock)

    held = [socket.create_connection(("127.0.0.1", started.port), timeout=10) for _ in range(PER_SOURCE)]
    try:
        assert [msa(send(sock, f"HELD-{n}"))[0] for n, sock in enumerate(held)] == ["AA"] * PER_SOURCE
        with socket.create_connection(("127.0.0.1", started.port), timeout=10) as extra:
            assert _closed_by_listener(extra, 5) < 5  # closed on accept, never served
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:  # the freed place is taken again (once the listener has seen the close)
            with socket.create_connection(("127.0.0.1", started.port), timeout=10) as again:
                answer = send(again, "AGAIN")
            if answer:
                assert msa(answer)[0] == "AA"
                break
            assert time.monotonic() < deadline, "the closed connection's place was never freed"
            time.sleep(0.05)
    finally:
        for sock in held:
            sock.close()


def _files_run(server: Server) -> dict[str, object]:
    with server.client() as api:
        dataset = make_dataset(api, "files", {"files": [{"path": "inbox/a.txt", "content": "a"}]})
        catalog = make_benchmark(api, [[]])
        ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset["id"]]}))
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
    credentials: dict[str, object] = started["credentials"]["sftp"]
    return credentials


class _Guesser(asyncssh.SSHClient):
    """Offers another wrong password each time the server asks, as a brute-force tool does."""

    def __init__(self) -> None:
        self.offered = 0

    def password_auth_requested(self) -> str | None:
        self.offered += 1
        return f"guess-{self.offered}" if self.offered <= 20 else None


async def _guess(host: str, port: int, username: str) -> tuple[int, float, Exception]:
    guesser = _Guesser()
    began = time.monotonic()
    try:
        await asyncssh.connect(
            host, port, username=username, known_hosts=None, client_factory=lambda: guesser,
            preferred_auth="password", client_keys=None, agent_path=None, login_timeout=30,
        )  # fmt: skip
    except (asyncssh.Error, OSError) as exc:
        return guesser.offered, time.monotonic() - began, exc
    raise AssertionError("a wrong password logged in")


def test_sftp_password_tries_are_capped_per_connection_and_slowed(limited: Server) -> None:
    sftp = _files_run(limited)
    offered, took, refused = asyncio.run(
        _guess(str(sftp["host"]), int(str(sftp["port"])), str(sftp["username"]))
    )
    assert offered == AUTH_TRIES, f"{offered} passwords offered on one connection ({refused!r})"
    # answered after BACKOFF, then 2·BACKOFF twice (the ceiling)
    assert took >= BACKOFF * 4.5, f"{AUTH_TRIES} wrong passwords answered in {took:.2f}s"

    transport = paramiko.Transport((str(sftp["host"]), int(str(sftp["port"]))))
    try:
        transport.connect(username=str(sftp["username"]), password=str(sftp["password"]))
        client = paramiko.SFTPClient.from_transport(transport)
        assert client is not None and client.listdir("inbox") == ["a.txt"]
    finally:
        transport.close()


def test_sftp_backoff_spans_connections_from_one_source(limited: Server) -> None:
    """Spreading guesses over new connections does not reset the wait."""
    sftp = _files_run(limited)
    began = time.monotonic()
    for n in range(3):
        with pytest.raises(paramiko.AuthenticationException):
            transport = paramiko.Transport((str(sftp["host"]), int(str(sftp["port"]))))
            try:
                transport.connect(username=str(sftp["username"]), password=f"other-{n}")
            finally:
                transport.close()
    assert time.monotonic() - began >= BACKOFF * 3
