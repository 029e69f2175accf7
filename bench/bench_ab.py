"""Two builds of `assay serve` on the agent path, up at once and measured in alternating slices.

    uv run python bench/bench_ab.py A=/path/to/a/.venv/bin/assay B=/path/to/b/.venv/bin/assay
        [--rounds 8] [--seconds 2] [--completes | --no-completes] [--postgres A_URL,B_URL]

On the 2-core machine the same build's agent-path throughput moves by a fifth between minutes
(`docs/performance.md`, "The agent path under load"), so two builds benchmarked one after the
other compare two phases of the machine, not two builds. Here both servers are up for the whole
run and take turns: `--rounds` slices of `--seconds` each, A, B, A, B, … under the load
`bench_load.py` drives (16 keep-alive clients sending run-token FHIR searches, and with
`--completes` one more client completing other task runs every quarter second). A phase of the
machine then falls on both. Prints each build's requests/s, server CPU per request (its process
group; with `--postgres`, the cluster's processes too) and `complete` p50, and B against A.

A build is an `assay` executable (a worktree's `.venv/bin/assay`). `--postgres`: each build on a
database of its own (2 workers each), for builds whose migrations differ.

Control: the same build as both A and B has measured a requests/s ratio of 0.99 and 1.09 in
two runs (two processes of one build differ: hash seeds, memory layout, which core they land on).
A difference means something only beyond that, and in the same direction over several runs with
the builds' order swapped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import _serve
import bench_load


@dataclass
class Build:
    name: str
    executable: str
    database_url: str | None = None
    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU per request of each slice, ms."""


def _builds(args: argparse.Namespace) -> list[Build]:
    builds = []
    for spec in args.builds:
        name, _, executable = spec.partition("=")
        if not executable or not Path(executable).exists():
            sys.exit(f"not an executable: {spec!r} (NAME=/path/to/.venv/bin/assay)")
        builds.append(Build(name, executable))
    if args.postgres:
        urls = args.postgres.split(",")
        if len(urls) != len(builds):
            sys.exit("--postgres: one database URL per build, comma-separated")
        for build, url in zip(builds, urls, strict=True):
            build.database_url = url
    return builds


def _measure(build: Build, target: bench_load.Target, load: argparse.Namespace) -> None:
    """One slice of `target` (`Target.slice`, completes running), its rate and CPU kept apart."""
    requests, cpu = len(target.result.latencies), sum(target.result.cpu.values())
    target.slice(load)
    count = len(target.result.latencies) - requests
    build.rates.append(count / (load.seconds / load.rounds))
    build.cpu.append((sum(target.result.cpu.values()) - cpu) / count * 1000 if count else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("builds", nargs=2, help="NAME=/path/to/.venv/bin/assay, twice")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per slice")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--completes", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--postgres", help="a database URL per build, comma-separated")
    args = parser.parse_args()
    builds = _builds(args)
    # What `bench_load`'s targets read: its seconds are all slices' together.
    load = argparse.Namespace(
        clients=args.clients,
        rounds=args.rounds,
        seconds=args.seconds * args.rounds,
        completes=12 * args.rounds if args.completes else 0,
    )
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.seconds:g} s")
    with tempfile.TemporaryDirectory(prefix="assay-ab-") as folder, ExitStack() as running:
        targets = []
        for build in builds:
            _serve.ASSAY = build.executable  # what `assay_serve` starts
            workers = 2 if build.database_url else 1
            url, group = running.enter_context(
                bench_load.serve(Path(folder) / build.name, database_url=build.database_url, workers=workers)
            )
            cluster = bench_load.postmaster(build.database_url) if build.database_url else None
            cpu = bench_load.server_cpu(group, cluster)
            targets.append((build, bench_load.agent_target(build.name, url, load, cpu)))
        for _ in range(args.rounds):
            for build, target in targets:
                _measure(build, target, load)
    for build, target in targets:
        complete = (
            f"; complete p50 {statistics.median(target.completes) * 1000:.1f} ms" if target.completes else ""
        )
        print(
            f"{build.name:12} {statistics.mean(build.rates):7.0f} req/s; "
            f"CPU per request {statistics.median(build.cpu):.3f} ms (median of slices){complete}"
        )
    a, b = builds
    print(
        f"{b.name} / {a.name}: requests/s {statistics.mean(b.rates) / statistics.mean(a.rates):.2f}, "
        f"CPU per request {statistics.median(b.cpu) / statistics.median(a.cpu):.2f}"
    )


if __name__ == "__main__":
    main()
