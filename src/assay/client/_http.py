"""One request, described once (`Call`), run by a sync or an async engine with the same retry rule.

Retry rule: a 429 or 503 answer, or a connection that was never made, is tried again up to
`max_retries` times. The wait is the server's `Retry-After` when it sent one (a 429 from Assay
always does), else exponential backoff with jitter (`backoff · 2^attempt`, capped at 30 s). A
`Retry-After` longer than `max_retry_wait` is not waited out: the error is raised at once, carrying
`retry_after`, so the caller decides. Other errors are never retried: a 409 or 422 will not change.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from assay.client._errors import APIConnectionError, AssayError, error_from_response, retry_after

__all__ = ["PAGE_SIZE", "AsyncEngine", "Call", "Engine", "RetryPolicy", "SyncEngine"]

T = TypeVar("T")
PAGE_SIZE = 100
"""Items asked for per page while iterating a list: the API's maximum (docs/api.md)."""
_RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One API request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    token: str | None = None
    """Bearer token for this call only (a run token), instead of the client's key."""
    timeout: float | None = None
    """Seconds for this call only, instead of the client's: a call the server answers only after
    long work (publishing self-tests every task) must not give up at the default."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: float = 0.5
    max_retry_wait: float = 60.0
    sleep: Callable[[float], Any] | None = field(default=None, compare=False)
    """Injected sleep (tests record the waits); None means `time.sleep` / `asyncio.sleep`."""

    def delay(self, attempt: int, failure: httpx.Response | None) -> float | None:
        """Seconds to wait before try `attempt + 1`, or None to give up now."""
        if attempt >= self.max_retries:
            return None
        asked = retry_after(failure) if failure is not None else None
        if asked is not None:
            return asked if asked <= self.max_retry_wait else None
        return min(30.0, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)


def _headers(call: Call[Any], default_token: str | None) -> dict[str, str]:
    token = call.token or default_token
    return {"Authorization": f"Bearer {token}"} if token else {}


def _params(call: Call[Any]) -> dict[str, Any] | None:
    if not call.params:
        return None
    return {key: value for key, value in call.params.items() if value is not None}


def _connection_error(call: Call[Any], exc: httpx.TransportError) -> APIConnectionError:
    return APIConnectionError(f"{call.method} {call.path}: no answer from the Assay API ({exc!r})")


def _retryable_transport(call: Call[Any], exc: httpx.TransportError) -> bool:
    """A connection never made is safe to retry for any method; a lost answer only for reads."""
    return isinstance(exc, httpx.ConnectError) or call.method in ("GET", "HEAD")


def _request(call: Call[Any], token: str | None) -> dict[str, Any]:
    """The arguments of `httpx.Client.request` / `AsyncClient.request` for one call."""
    arguments = {
        "method": call.method,
        "url": call.path,
        "json": call.json,
        "params": _params(call),
        "headers": _headers(call, token),
    }
    if call.timeout is not None:
        arguments["timeout"] = call.timeout
    return arguments


def _wait_after_failure(
    call: Call[Any], exc: httpx.TransportError, attempt: int, retry: RetryPolicy
) -> float:
    """How long to wait before retrying a request that got no answer; raises when it may not retry."""
    wait = retry.delay(attempt, None) if _retryable_transport(call, exc) else None
    if wait is None:
        raise _connection_error(call, exc) from exc
    return wait


def _wait_after_refusal(response: httpx.Response, attempt: int, retry: RetryPolicy) -> float:
    """How long to wait before retrying a 4xx/5xx answer; raises its error when it may not retry."""
    wait = retry.delay(attempt, response) if response.status_code in _RETRY_STATUSES else None
    if wait is None:
        raise error_from_response(response)
    return wait


class SyncEngine:
    def __init__(self, http: httpx.Client, token: str | None, retry: RetryPolicy):
        self.http, self.token, self.retry = http, token, retry

    def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = self.http.request(**_request(call, self.token))
            except httpx.TransportError as exc:
                wait = _wait_after_failure(call, exc, attempt, self.retry)
            else:
                if response.is_success:
                    return call.parse(response)
                wait = _wait_after_refusal(response, attempt, self.retry)
            (self.retry.sleep or time.sleep)(wait)
            attempt += 1

    def pages(self, path: str, params: Mapping[str, Any], parse: Callable[[Any], T]) -> Iterator[T]:
        cursor: str | None = None
        while True:
            page = self.run(Call("GET", path, _json, params={**params, "limit": PAGE_SIZE, "cursor": cursor}))
            yield from (parse(item) for item in page["data"])
            cursor = page["_meta"]["next"]
            if not cursor:
                return


class AsyncEngine:
    def __init__(self, http: httpx.AsyncClient, token: str | None, retry: RetryPolicy):
        self.http, self.token, self.retry = http, token, retry

    async def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self.http.request(**_request(call, self.token))
            except httpx.TransportError as exc:
                wait = _wait_after_failure(call, exc, attempt, self.retry)
            else:
                if response.is_success:
                    return call.parse(response)
                wait = _wait_after_refusal(response, attempt, self.retry)
            slept = (self.retry.sleep or asyncio.sleep)(wait)
            if asyncio.iscoroutine(slept):
                await slept
            attempt += 1

    async def pages(
        self, path: str, params: Mapping[str, Any], parse: Callable[[Any], T]
    ) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            page = await self.run(
                Call("GET", path, _json, params={**params, "limit": PAGE_SIZE, "cursor": cursor})
            )
            for item in page["data"]:
                yield parse(item)
            cursor = page["_meta"]["next"]
            if not cursor:
                return


Engine = SyncEngine | AsyncEngine


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise AssayError(f"the API answered {response.status_code} with a body that is not JSON") from exc
