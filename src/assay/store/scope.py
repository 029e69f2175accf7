"""Who is asking: every repository query is filtered by a `Caller` (as Polar's
`get_readable_statement` does), so a row outside the caller's scope is simply not found."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from assay.store.errors import NotFound

__all__ = ["Caller", "CallerKind", "first_or_404", "get_owned", "owned", "where_given"]

CallerKind = Literal["org", "solver", "run"]
M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated token: an org key, a Solver key (with its solver) or a run token (its run)."""

    kind: CallerKind
    org_id: str
    key_id: str | None = None
    solver_id: str | None = None
    benchmark_run_id: str | None = None


def owned(model: type[M], caller: Caller) -> Select[M]:
    """`SELECT model WHERE org_id = caller's org`: the base of every catalog query."""
    return select(model).where(model.org_id == caller.org_id)  # type: ignore[attr-defined]


def get_owned(session: Session, model: type[M], caller: Caller, ident: str, noun: str, **filters: Any) -> M:
    """One row of the caller's org by id, or `NotFound` — also for another org's id."""
    statement = owned(model, caller).where(model.id == ident)  # type: ignore[attr-defined]
    for key, value in filters.items():
        statement = statement.where(getattr(model, key) == value)
    return first_or_404(session, statement, noun, ident)


def first_or_404(session: Session, statement: Select[M], noun: str, ident: str) -> M:
    """The first row of `statement` (already scoped to the caller), or `NotFound` naming `noun ident`."""
    row = session.scalars(statement).first()
    if row is None:
        raise NotFound.of(noun, ident)
    return row


def where_given(statement: Select[M], column: Any, value: str | None) -> Select[M]:
    """`statement` narrowed to `column == value`, or as it is when the client left the optional
    `?filter=` out (None or empty)."""
    return statement.where(column == value) if value else statement
