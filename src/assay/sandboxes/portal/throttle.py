"""Slowing down wrong passwords at the web portal's sign-in, per source and per session.

A portal's sign-in form is reachable by anyone who knows its task run's id, so counting wrong
passwords per portal let a stranger lock the agent out for the rest of its task. Failures count
per client address (an IPv6 client by its /64, which one host can fill with addresses) and per
portal session instead, each within one portal: after `free_failures` of them, every further
failure makes that source or session wait before its next attempt, `backoff` seconds doubling up
to `max_backoff`. An attempt made while waiting is refused unchecked (429 + Retry-After) and does
not count, so the wait always ends. A right password clears both keys.

Counts live in each worker process's memory, as `ASSAY_RATE_LIMIT`'s buckets do: nothing here is
graded state, a restart forgets them, and with N workers a source may make N times the attempts.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["FORGET_AFTER", "MAX_KEYS", "SignInThrottle", "ThrottleSettings", "source_key"]

FORGET_AFTER = 15 * 60.0
"""Seconds after its last failure when a source's or session's count starts again from zero."""
MAX_KEYS = 50_000
"""Sources and sessions one worker remembers (the longest unseen go first): memory stays flat
whatever number of addresses a stranger uses."""


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    free_failures: int = 5
    """`ASSAY_PORTAL_SIGN_IN_FREE_FAILURES`: wrong passwords a source or session may make at once."""
    backoff: float = 1.0
    """`ASSAY_PORTAL_SIGN_IN_BACKOFF`: seconds of the first wait; each further failure doubles it."""
    max_backoff: float = 60.0
    """`ASSAY_PORTAL_SIGN_IN_BACKOFF_MAX`: the longest wait, in seconds."""


@dataclass(slots=True)
class _Count:
    failures: int
    last_failure: float
    wait_until: float


def source_key(host: str | None) -> str:
    """The key of a client address: an IPv6 address by its /64 network, an IPv4 one (mapped or
    not) as it is; anything else (a Unix socket, no address) as given."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class SignInThrottle:
    """Failure counts by key (`portal id + source`, `portal id + session`), for one process."""

    def __init__(self, settings: ThrottleSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._counts: OrderedDict[str, _Count] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, keys: Iterable[str]) -> int:
        """Whole seconds before any of `keys` may try again; 0 when all may now."""
        now = self._clock()
        with self._lock:
            found = [self._counts.get(key) for key in keys]
        until = max((count.wait_until for count in found if count is not None), default=now)
        return math.ceil(until - now) if until > now else 0

    def failed(self, keys: Iterable[str]) -> int:
        """Count a wrong password against each of `keys`; whole seconds they must now wait (0: none)."""
        now = self._clock()
        settings = self.settings
        longest = 0.0
        with self._lock:
            for key in keys:
                count = self._counts.pop(key, None)
                if count is None or now - count.last_failure > FORGET_AFTER:
                    count = _Count(0, now, now)
                count.failures += 1
                count.last_failure = now
                beyond = count.failures - settings.free_failures
                if beyond > 0:
                    delay = min(settings.backoff * 2 ** min(beyond - 1, 64), settings.max_backoff)
                    count.wait_until = now + delay
                    longest = max(longest, delay)
                self._counts[key] = count  # last: the most recently seen
            while len(self._counts) > MAX_KEYS:
                self._counts.popitem(last=False)
        return math.ceil(longest)

    def succeeded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._counts.pop(key, None)
