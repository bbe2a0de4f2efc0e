"""What an API client is told for each kind of error: the status says whether to retry."""

from __future__ import annotations

import pytest

from jarvis.domain.errors import ConfigurationError, EngineUnavailableError
from jarvis.domain.knowledge import MemoryStoreBusyError, MemoryStoreDamagedError
from jarvis.domain.sessions.records import SessionStoreCorruptError, SessionStoreLockedError
from jarvis.entrypoints.http.errors import api_error


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (MemoryStoreBusyError("The memory database stayed locked."), 503, "store_unavailable"),
        (SessionStoreLockedError("The session database stayed locked."), 503, "store_unavailable"),
        (MemoryStoreDamagedError("The memory database cannot be read."), 500, "store_error"),
        (SessionStoreCorruptError("The session database is damaged."), 500, "store_error"),
        (EngineUnavailableError("Cannot reach the engine."), 503, "engine_unavailable"),
        (ConfigurationError("Unknown agent."), 400, "invalid_request_error"),
    ],
)
def test_a_server_side_condition_is_not_a_client_error(
    error: Exception, status: int, kind: str
) -> None:
    mapped = api_error(error)
    assert (mapped.status, mapped.type) == (status, kind)
    assert mapped.message.startswith(str(error).splitlines()[0])


def test_an_unexpected_error_says_nothing_of_itself() -> None:
    mapped = api_error(ValueError("/srv/secret/path"))
    assert (mapped.status, mapped.message) == (500, "Internal server error.")
