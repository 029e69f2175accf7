"""Server choice: the same app and load as `bench_load.py`, served by `assay serve` (uvicorn with
Assay's own protocol and supervisor, `service/server.py`) and by Granian, back to back.

    uv run --with granian python bench/bench_server_choice.py [--seconds 10] [--clients 16] [--rounds 4]

Granian is not a dependency of Assay: `uv run --with granian` puts it in a throwaway environment
for this run. Both servers run one worker on SQLite in a data directory of their own, loaded with
`bench_load`'s agent path (run-token FHIR searches over the Synthea fixtures, 16 keep-alive
clients, one more client completing task runs meanwhile); they are up at once and take turns
(`--rounds` slices each), so a change in the machine's speed falls on both. Granian serves
`assay.service.app:create_app` as an ASGI factory (the app reads its settings from `ASSAY_*`,
as each worker of `assay serve` does) on uvloop with its access log off, as `assay serve` runs.

Prints each server's requests/s, p50/p99, errors, server CPU per request and `complete`'s p50
under load, then the ratios Granian / uvicorn. The choice (`docs/decisions.md`, "Server") keeps
the patched uvicorn unless Granian serves at least as many requests per second at no more CPU
per request.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from _serve import _healthy, free_port
from bench_load import KEY, Target, _line, agent_target, cpu_seconds, serve


@contextmanager
def granian_serve(data_dir: Path, timeout: float = 120.0) -> Iterator[tuple[str, int]]:
    """(base URL, process group) of the app under Granian, one worker, configured as `assay serve`
    configures its workers (`bench/_serve.py`: no inherited `ASSAY_*`, listeners on free ports)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ASSAY_")}
    environment.update(
        ASSAY_BOOTSTRAP_API_KEY=KEY,
        ASSAY_DATA_DIR=str(data_dir.resolve()),
        ASSAY_MLLP_PORT="0",
        ASSAY_SFTP_PORT="0",
        ASSAY_SWEEP_INTERVAL="5",
        ASSAY_LISTEN_HOST="127.0.0.1",
    )
    command = [
        *(sys.executable, "-m", "granian", "--interface", "asgi", "--factory"),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        *("--loop", "uvloop", "--no-access-log", "--log-level", "warning"),
        "assay.service.app:create_app",
    ]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                _, error = process.communicate(timeout=5) if process.poll() is not None else (b"", b"")
                raise RuntimeError(f"granian did not come up (exit {process.poll()}): {error[-2000:]!r}")
            time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per server")
    parser.add_argument("--clients", type=int, default=16, help="concurrent keep-alive connections")
    parser.add_argument("--completes", type=int, default=40, help="task runs completed during the load")
    parser.add_argument("--rounds", type=int, default=4, help="turns each server's measured seconds take")
    args = parser.parse_args()
    try:
        import granian
    except ImportError:
        sys.exit("granian is not installed here: uv run --with granian python bench/bench_server_choice.py")
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"granian {granian.__version__}, load average {os.getloadavg()[0]:.2f}; "
        f"{args.clients} clients, {args.seconds:.0f} s each"
    )
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder, ExitStack() as running:
        targets: list[Target] = []
        for name, server in (
            ("uvicorn (assay serve, 1 worker)", serve(Path(folder) / "uvicorn")),
            ("granian (1 worker)", granian_serve(Path(folder) / "granian")),
        ):
            url, group = running.enter_context(server)

            def cpu(group: int = group) -> dict[str, float]:
                return {"": cpu_seconds(groups=(group,))}

            targets.append(agent_target(name, url, args, cpu))
        for _ in range(args.rounds):
            for target in targets:
                target.slice(args)
    print(f"{'server':44} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for target in targets:
        print(_line(target.name, target.result))
        cpu_ms = sum(target.result.cpu_per_request_ms.values())
        completes = target.completes
        complete = (
            f"; complete under load p50 {statistics.median(completes) * 1000:.1f} ms" if completes else ""
        )
        print(f"{'':44} server CPU per request {cpu_ms:.3f} ms{complete}")
    uvicorn, granian_target = targets[0].result, targets[1].result
    uvicorn_cpu = sum(uvicorn.cpu_per_request_ms.values())
    granian_cpu = sum(granian_target.cpu_per_request_ms.values())
    print(
        f"granian / uvicorn: req/s {granian_target.rate / uvicorn.rate:.2f}x, "
        f"p50 {granian_target.pct(0.5) / uvicorn.pct(0.5):.2f}x, "
        f"CPU per request {granian_cpu / uvicorn_cpu:.2f}x"
        if uvicorn.rate and uvicorn_cpu
        else "granian / uvicorn: no requests measured"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
