"""MLLP benchmark: ACKs per second on one connection, and per-message latency.

    uv run python bench/bench_mllp.py [--messages N]

Starts the real service (uvicorn in a thread, the embedded SQLite store in a temp dir, the MLLP
listener on a free port), creates a benchmark run through the API and starts one task run, then
sends N ~1 KB ADT^A08 messages one after another over ONE MLLP connection, each waiting for its
ACK (python-hl7's client does the same). Every message is parsed, routed by MSH-6.1, stored and
logged as an event before its `AA` goes back.

Peer: a bare asyncio MLLP server on the same machine that answers every frame with a constant ACK
(no parsing, no routing, no database) — the floor of the framing and socket round trip, so the
ratio shows what the HL7 work and the one commit per message (the message and its event) cost.

Targets: ≥ 1,000 ACKs/s, p50 < 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import uvicorn

from assay.service.app import create_app
from assay.service.settings import Settings

KEY = "vk_bench_" + uuid.uuid4().hex
END = b"\x1c\x0d"


def adt(facility: str, n: int) -> bytes:
    """An ADT^A08 of about 1 KB (MSH, EVN, PID, PV1, two NK1, four OBX)."""
    segments = [
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|B-{n}|P|2.5.1",
        "EVN|A08|20260301120500|||OPERATOR^BENCH",
        "PID|1||MRN123^^^HOSP^MR~999-99-9999^^^SSA^SS||SMITH^JOHN^Q^JR||19800101|M|||1 Main St^Apt 4^Springfield^IL^62701^USA||(217)555-0100|(217)555-0199|EN|M|CHR|ACC123|999-99-9999",
        "PV1|1|O|CLINIC^101^A^HOSP||||1234567890^RIVERA^ANA^^^DR|||MED||||1|||1234567890^RIVERA^ANA^^^DR|OP|VIS123|||||||||||||||||||||||||20260301120000",
        "NK1|1|SMITH^JANE|SPO^Spouse|1 Main St^Apt 4^Springfield^IL^62701^USA|(217)555-0101",
        "NK1|2|SMITH^JACK|CHD^Child|1 Main St^Apt 4^Springfield^IL^62701^USA|(217)555-0102",
    ]
    segments += [
        f"OBX|{i}|NM|8867-4^Heart rate^LN||{60 + i}|/min^beats per minute^UCUM|60-100|N|||F|||20260301120000"
        for i in range(1, 5)
    ]
    return ("\r".join(segments) + "\r").encode()


def _serve(settings: Settings) -> tuple[uvicorn.Server, str]:
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


def _start_task_run(url: str) -> dict[str, object]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as api:
        benchmark = api.post("/benchmarks", json={"name": "mllp bench"}).json()
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "send"}).json()
        api.post("/criteria", json={"task_id": task["id"], "label": "sent", "assertion": {
            "assert": "hl7-structural", "fields": [{"path": "PID.5.1", "expected": "SMITH"}]
        }}).raise_for_status()  # fmt: skip
        run = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}).json()
        started = api.post(
            run["task_runs"][0]["start_url"], headers={"Authorization": f"Bearer {run['bearer_token']}"}
        ).json()
        hl7: dict[str, object] = started["credentials"]["hl7"]
        return hl7


def _exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(b"\x0b" + data + END)
    answer = b""
    while not answer.endswith(END):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        answer += chunk
    return answer


def _measure(port: int, messages: list[bytes], cpu: list[float] | None = None) -> list[float]:
    """Per-message latencies; `cpu` gets the server's CPU seconds per message (this process's CPU
    time less the sending thread's own)."""
    latencies = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for warm in messages[:20]:
            _exchange(sock, warm)
        process, thread = time.process_time(), time.thread_time()
        for message in messages:
            began = time.perf_counter()
            ack = _exchange(sock, message)
            latencies.append(time.perf_counter() - began)
            if b"MSA|AA|" not in ack:
                raise RuntimeError(f"not accepted: {ack[:300]!r}")
        if cpu is not None:
            cpu.append(((time.process_time() - process) - (time.thread_time() - thread)) / len(messages))
    return latencies


def _bare_peer(messages: list[bytes]) -> list[float]:
    """A constant-ACK asyncio MLLP server in a thread: framing and round trip only."""
    ack = b"\x0bMSH|^~\\&|LAB|X|AGENT|CLINIC|20260301120500||ACK^A08^ACK|1|P|2.5.1\rMSA|AA|B-1" + END
    ready: list[int] = []
    loop = asyncio.new_event_loop()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffer = b""
        while data := await reader.read(65536):
            buffer += data
            while END in buffer:
                _, buffer = buffer.split(END, 1)
                writer.write(ack)
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True).start()
    while not ready:
        time.sleep(0.01)
    return _measure(ready[0], messages)


def _report(name: str, latencies: list[float]) -> float:
    total = sum(latencies)
    rate = len(latencies) / total
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[int(len(ordered) * 0.99) - 1] * 1000
    print(f"{name:<34} {rate:>9,.0f} ACKs/s   p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="assay-bench-mllp-") as folder:
        settings = Settings(data_dir=Path(folder), bootstrap_api_key=KEY).with_free_ports()
        server, url = _serve(settings)
        try:
            hl7 = _start_task_run(url)
            messages = [adt(str(hl7["receiving_facility"]), n) for n in range(args.messages)]
            size = statistics.mean(len(m) for m in messages)
            print(f"{args.messages} messages of {size:,.0f} bytes, one connection, each waiting for its ACK")
            cpu: list[float] = []
            ours = _report("assay MLLP listener (SQLite)", _measure(int(str(hl7["port"])), messages, cpu))
            print(f"{'':<34} server CPU per message: {cpu[0] * 1e6:,.0f} µs (all its threads)")
            bare = _report("bare asyncio constant-ACK peer", _bare_peer(messages))
            print(f"assay / bare peer: {ours / bare:.2f}x the rate   target: >= 1,000 ACKs/s, p50 < 5 ms")
        finally:
            server.should_exit = True
    sys.stdout.flush()


if __name__ == "__main__":
    main()
