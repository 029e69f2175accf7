"""Run tokens cached per worker, so the agent's hot path resolves its caller without SQL.

What is cached, and why it stays right:

- **Run tokens only.** A benchmark run's token row (`token_hash`, org, solver, run id,
  `token_expires_at`) is written once when the run is created and never changed, and a run token
  is revoked only by expiring. (A self-test run is deleted with its benchmark; its token never
  left the server, and a cached one finds no run: 404.) The cache keeps the expiry and checks it
  against the clock on every use, so an expired token is refused at the same instant as without
  the cache, in every worker. A bounded number of entries (oldest out first). The worker that
  creates a run caches its token at once (`remember`).
- **API keys are not cached.** An org or Solver key can be deleted (`DELETE .../api-keys/{id}`)
  through any worker, and that must take effect at once everywhere; they are looked up on each
  request with a read-only unit of work (no write lock), which is cheap and not on the agent path.

A miss (or an API key) costs one worker-thread hop for the read; a hit costs a sha256 and a dict
lookup on the event loop.
"""

from __future__ import annotations

import threading
from datetime import datetime

from sqlalchemy.orm import Session

from assay.service.auth.actions import bearer_token, resolve_token, run_caller
from assay.store import Caller, Database, Unauthorized, utcnow
from assay.store.models import BenchmarkRun
from assay.store.tokens import RUN_TOKEN_PREFIX, hash_token

__all__ = ["TokenCache"]

MAX_ENTRIES = 10_000


class TokenCache:
    def __init__(self, database: Database, max_entries: int = MAX_ENTRIES):
        self.database = database
        self.max_entries = max_entries
        self._runs: dict[str, tuple[Caller, datetime]] = {}
        self._lock = threading.Lock()

    def cached(self, authorization: str | None) -> Caller | None:
        """The caller of a cached run token; None when it needs a lookup. Raises `Unauthorized`
        for a missing header or an expired token without touching the database."""
        token = bearer_token(authorization)
        if not token.startswith(RUN_TOKEN_PREFIX):
            return None
        found = self._runs.get(hash_token(token))
        if found is None:
            return None
        caller, expires_at = found
        if expires_at <= utcnow():
            raise Unauthorized("run token expired")
        return caller

    def resolve(self, authorization: str | None, session: Session | None = None) -> Caller:
        """Look the token up and cache a run token: in `session`, else in a read-only unit of work
        of its own, on the calling thread."""
        token = bearer_token(authorization)
        digest = hash_token(token)
        if session is not None:
            caller, expires_at = resolve_token(session, token, digest)
        else:
            with self.database.reading() as own:
                caller, expires_at = resolve_token(own, token, digest)
        if expires_at is not None:
            self._keep(digest, caller, expires_at)
        return caller

    def remember(self, token: str, benchmark_run: BenchmarkRun) -> None:
        """Cache the token of a run this worker just created, so the agent's first request with it
        (its `start`, most often on the same connection) needs no lookup. Kept before the run's
        commit: a token whose run never committed was never shown to anyone."""
        self._keep(hash_token(token), run_caller(benchmark_run), benchmark_run.token_expires_at)

    def _keep(self, digest: str, caller: Caller, expires_at: datetime) -> None:
        with self._lock:
            if len(self._runs) >= self.max_entries:
                self._runs.pop(next(iter(self._runs)))
            self._runs[digest] = (caller, expires_at)

    def clear(self) -> None:
        """Forget every cached token (for a row edited behind the API's back, as tests do)."""
        with self._lock:
            self._runs.clear()
