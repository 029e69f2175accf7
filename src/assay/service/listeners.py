"""The listener process of a multi-worker deployment (`assay serve --workers N`, docs/api.md).

Each surface listener (MLLP, SFTP) must run once per deployment, not once per API worker: two
workers cannot both bind port 2575, and a message must be handled once. So `serve` starts this
process first, waits for it to report the ports it bound (a configured 0 becomes a real port),
hands those ports to the workers (`ASSAY_MLLP_PORT`, … and `ASSAY_LISTENERS=0`), and restarts the
process, on the same ports, if it dies. With one worker the app's lifespan runs the listeners
in-process instead and none of this is used.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import cast

from sqlalchemy import Engine

from assay.core.memory import release_heap, settle_heap
from assay.sandboxes import Deployment, Listeners, has_listeners, open_deployment
from assay.service.orphans import exit_with_parent
from assay.service.settings import Settings
from assay.store import Database

__all__ = ["ListenerSupervisor", "needs_listener_process", "open_settings_deployment", "run_listeners"]

log = logging.getLogger("assay.service")

START_TIMEOUT = 60.0


def open_settings_deployment(engine: Engine, settings: Settings) -> Deployment:
    """The surfaces opened on `engine` as `settings` place them (host, listener ports, options):
    the same in the API process and the listener process."""
    return open_deployment(
        Deployment(
            engine,
            host=settings.listen_host,
            data_dir=settings.data_dir.resolve(),
            ports=dict(settings.listener_ports),
            options=settings.surface_options,
        )
    )


def needs_listener_process(settings: Settings) -> bool:
    """Whether any registered surface has a listener (no process is started otherwise). Asking
    builds the listeners without starting them, which touches no database."""
    probe = Deployment(
        cast(Engine, None),
        host=settings.listen_host,
        ports=dict(settings.listener_ports),
        options=settings.surface_options,
    )
    return has_listeners(probe)


def run_listeners(settings: Settings, report: Connection) -> None:
    """The listener process: migrate, start every listener, report `{surface: port}` on `report`,
    then serve until SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    exit_with_parent()  # `serve` killed: free the listener ports (service/orphans.py)
    database = Database(settings.resolved_database_url)
    database.migrate()
    deployment = open_settings_deployment(database.engine, settings)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # Ctrl-C reaches the whole process group; `serve` stops this process itself (SIGTERM) once
        # the workers are down, so a SIGINT here is ignored rather than racing the supervisor.
        loop.add_signal_handler(signal.SIGINT, lambda: None)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        listeners = Listeners(deployment)
        try:
            ports = await listeners.start()
        except BaseException as exc:
            report.send({"error": f"{type(exc).__name__}: {exc}"})
            raise
        report.send({"ports": ports})
        settle_heap()  # as an API worker does (core/memory.py)
        try:
            await stop.wait()
        finally:
            release_heap()
            await listeners.stop()

    try:
        asyncio.run(main())
    finally:
        database.dispose()


class ListenerSupervisor:
    """Starts the listener process, and restarts it on the ports it bound first if it dies."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.ports: dict[str, int] = {}
        self._context = multiprocessing.get_context("spawn")
        self._process: BaseProcess | None = None
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> dict[str, int]:
        """Start the process and wait for its bound ports; `RuntimeError` naming the failure."""
        self.ports = self._spawn(self.settings)
        self._watcher = threading.Thread(target=self._watch, name="assay-listener-watch", daemon=True)
        self._watcher.start()
        return self.ports

    def worker_environment(self) -> dict[str, str]:
        """What the API workers are told: the bound ports, and not to run listeners themselves."""
        bound = self.settings.with_listener_ports(self.ports).listener_port_variables()
        return {"ASSAY_LISTENERS": "0", **bound}

    def _spawn(self, settings: Settings) -> dict[str, int]:
        receive, send = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_listeners, args=(settings, send), name="assay-listeners", daemon=True
        )
        process.start()
        send.close()
        self._process = process
        if not receive.poll(START_TIMEOUT):
            process.terminate()
            raise RuntimeError("the listener process did not report its ports in time")
        try:
            message = receive.recv()
        except EOFError:
            raise RuntimeError("the listener process exited before it was ready") from None
        if "error" in message:
            process.join(5)
            raise RuntimeError(f"the listeners could not start: {message['error']}")
        ports: dict[str, int] = message["ports"]
        return ports

    def _watch(self) -> None:
        pinned = self.settings.with_listener_ports(self.ports)
        while not self._stopping.is_set():
            process = self._process
            if process is None:
                return
            process.join(0.5)
            if process.is_alive() or self._stopping.is_set():
                continue
            log.warning("the listener process exited (code %s); restarting it", process.exitcode)
            try:
                self._spawn(pinned)
            except RuntimeError as exc:
                log.error("%s; retrying in 1 s", exc)
                self._stopping.wait(1.0)

    def stop(self) -> None:
        self._stopping.set()
        process = self._process
        if process is not None and process.is_alive():
            process.terminate()
            process.join(10)
            if process.is_alive():
                process.kill()
        if self._watcher is not None:
            self._watcher.join(5)
