"""Bearer token → `Caller` (docs/api.md): 401 for a missing, unknown or expired token.

The token's prefix says which table holds its hash; the lookup is by sha256 digest and the digest
is compared again in constant time, so no timing difference reveals a near miss. Only the
columns auth needs are read (this runs on every request). `resolve_token` also returns a run
token's expiry, for the per-worker cache (`cache.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.store import Caller, Unauthorized, utcnow
from assay.store.models import ApiKey, BenchmarkRun
from assay.store.tokens import (
    ORG_KEY_PREFIX,
    RUN_TOKEN_PREFIX,
    SOLVER_KEY_PREFIX,
    digests_match,
    hash_token,
)

__all__ = ["authenticate", "bearer_token", "resolve_token", "run_caller"]


def bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <key>`")
    return token.strip()


def authenticate(session: Session, authorization: str | None) -> Caller:
    token = bearer_token(authorization)
    return resolve_token(session, token, hash_token(token))[0]


def run_caller(run: Any) -> Caller:
    """The caller a benchmark run's token stands for (`run`: its row, or the columns `id`,
    `org_id` and `solver_id` of it)."""
    return Caller("run", run.org_id, benchmark_run_id=run.id, solver_id=run.solver_id)


def resolve_token(session: Session, token: str, digest: str) -> tuple[Caller, datetime | None]:
    """(caller, run token expiry or None for an API key) of `token`, whose sha256 is `digest`."""
    if token.startswith(RUN_TOKEN_PREFIX):
        columns = (BenchmarkRun.id, BenchmarkRun.org_id, BenchmarkRun.solver_id, BenchmarkRun.token_hash)
        run = session.execute(
            select(*columns, BenchmarkRun.token_expires_at).where(BenchmarkRun.token_hash == digest)
        ).first()
        if run is None or not digests_match(run.token_hash, digest):
            raise Unauthorized("invalid run token")
        if run.token_expires_at <= utcnow():
            raise Unauthorized("run token expired")
        return run_caller(run), run.token_expires_at
    if token.startswith((ORG_KEY_PREFIX, SOLVER_KEY_PREFIX)):
        key = session.execute(
            select(ApiKey.id, ApiKey.org_id, ApiKey.kind, ApiKey.solver_id, ApiKey.token_hash).where(
                ApiKey.token_hash == digest
            )
        ).first()
        if key is None or not digests_match(key.token_hash, digest):
            raise Unauthorized("invalid API key")
        if key.kind == "solver":
            return Caller("solver", key.org_id, key_id=key.id, solver_id=key.solver_id), None
        return Caller("org", key.org_id, key_id=key.id), None
    raise Unauthorized("invalid token: expected a vk_, vrl_slv_ or vrl_run_ token")
