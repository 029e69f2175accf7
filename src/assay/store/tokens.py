"""Bearer tokens: generated with `secrets`, stored only as sha256, compared in constant time.

sha256 (unsalted) is enough for 190-bit random tokens: no dictionary can reach them, and a keyed
lookup by digest keeps auth one indexed query.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.store.ids import new_id, utcnow
from assay.store.models import ApiKey, Organization

__all__ = [
    "ORG_KEY_PREFIX",
    "RUN_TOKEN_PREFIX",
    "SOLVER_KEY_PREFIX",
    "MintedKey",
    "digests_match",
    "ensure_api_key",
    "ensure_org",
    "generate_token",
    "hash_token",
    "mint_key",
]

ORG_KEY_PREFIX = "vk_"
SOLVER_KEY_PREFIX = "vrl_slv_"
RUN_TOKEN_PREFIX = "vrl_run_"
DEFAULT_ORG_NAME = "default"


def generate_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def digests_match(stored_hash: str, digest: str) -> bool:
    """`hash_token(token) == stored_hash` in constant time, for a digest the caller already has."""
    return hmac.compare_digest(stored_hash, digest)


@dataclass(frozen=True, slots=True)
class MintedKey:
    row: ApiKey
    token: str
    """The plaintext, shown once."""


def mint_key(
    session: Session,
    org_id: str,
    *,
    kind: str = "org",
    solver_id: str | None = None,
    name: str | None = None,
    token: str | None = None,
) -> MintedKey:
    """A new org key (`vk_`) or Solver key (`vrl_slv_`); the caller shows `token` once."""
    prefix = ORG_KEY_PREFIX if kind == "org" else SOLVER_KEY_PREFIX
    token = token or generate_token(prefix)
    row = ApiKey(
        id=new_id("key_"),
        org_id=org_id,
        kind=kind,
        solver_id=solver_id,
        name=name,
        token_hash=hash_token(token),
        prefix=token[: len(prefix) + 4],
        suffix=token[-4:],
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return MintedKey(row, token)


def ensure_org(session: Session, name: str = DEFAULT_ORG_NAME) -> Organization:
    """The organization called `name`, created when missing (`default` is the default org)."""
    org = session.scalars(select(Organization).where(Organization.name == name)).first()
    if org is None:
        org = Organization(
            id=new_id("org_"), name=name, is_default=name == DEFAULT_ORG_NAME, created_at=utcnow()
        )
        session.add(org)
        session.flush()
    return org


def ensure_api_key(session: Session, token: str) -> ApiKey:
    """Make sure a key of the default org with exactly this plaintext exists (`ASSAY_BOOTSTRAP_API_KEY`)."""
    if not token.startswith(ORG_KEY_PREFIX):
        raise ValueError(f"a bootstrap API key must start with {ORG_KEY_PREFIX}")
    existing = session.scalars(select(ApiKey).where(ApiKey.token_hash == hash_token(token))).first()
    if existing is not None:
        return existing
    org = ensure_org(session)
    return mint_key(session, org.id, name="bootstrap", token=token).row
