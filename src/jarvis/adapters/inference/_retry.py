"""How often and how long to wait before an engine request is tried again."""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to wait before trying a request again."""

    max_retries: int = 2
    backoff: float = 0.5
    """The first delay in seconds; each further retry doubles it."""
    backoff_cap: float = 8.0
    """No single wait is longer, whatever ``Retry-After`` asks for."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` ("equal jitter")."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.backoff_cap))
        ceiling: float = min(self.backoff_cap, self.backoff * 2.0**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: either a number or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)
