"""What an engine answered: a whole reply, an error status for the adapter to map, and the
error a status becomes when no adapter-specific rule claims it."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from jarvis.adapters.inference._error_bodies import error_message
from jarvis.domain.errors import EngineUnavailableError, InferenceError, RateLimitedError


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole (non-streamed) response with a success status: its body read, under its cap."""

    status: int
    url: str
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class EngineStatusError(Exception):
    """An error status that was not retried (or no longer): for the adapter to map."""

    def __init__(self, status: int, body: str, url: str) -> None:
        super().__init__(f"HTTP {status} from {url}")
        self.status = status
        self.body = body
        self.url = url


def default_status_error(engine: str, status: int, body: str, url: str) -> InferenceError:
    """The error for a status no adapter-specific rule claimed."""
    message = error_message(body) or httpx.codes.get_reason_phrase(status)
    if status == 429:
        return RateLimitedError(
            f"The {engine} engine at {url} is rate limiting requests: {message}",
            engine=engine,
            url=url,
            hint="Wait a moment and try again, or lower the request rate.",
        )
    if status in (502, 503, 504):
        return EngineUnavailableError(
            f"The {engine} engine at {url} is unavailable (HTTP {status}): {message}",
            engine=engine,
            url=url,
        )
    if status in (401, 403):
        return InferenceError(
            f"The {engine} engine at {url} refused the credentials (HTTP {status}): {message}",
            engine=engine,
            url=url,
            hint="Check the API key (OPENAI_API_KEY or the api_key setting).",
        )
    return InferenceError(
        f"The {engine} engine at {url} answered HTTP {status}: {message}",
        engine=engine,
        url=url,
    )
