"""The SQL stores on either driver, built as the composition root builds them."""

from __future__ import annotations

import os

from jarvis.adapters.sql_store import SqlBackend, SqlSessionStore
from jarvis.adapters.sql_store.postgres_driver import PostgresDriver
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.domain.approval_store import StoredApproval
from jarvis.domain.llm.messages import Message


def sqlite_backend(
    path: str | os.PathLike[str], *, busy_timeout: float = 10.0, durable: bool = False
) -> SqlBackend:
    return SqlBackend(SqliteDriver(path, busy_timeout=busy_timeout, durable=durable))


def sqlite_sessions(
    path: str | os.PathLike[str], *, busy_timeout: float = 10.0, durable: bool = False
) -> SqlSessionStore:
    return sqlite_backend(path, busy_timeout=busy_timeout, durable=durable).sessions


def postgres_backend(url: str, *, connect_timeout: float = 5.0) -> SqlBackend:
    return SqlBackend(PostgresDriver(url, connect_timeout=connect_timeout))


def postgres_sessions(url: str, *, connect_timeout: float = 5.0) -> SqlSessionStore:
    return postgres_backend(url, connect_timeout=connect_timeout).sessions


async def the_earlier_data_goes_on(backend: SqlBackend) -> None:
    """Reads and extends the data of ``tests/integration/data/*_v1.sql`` (a database the
    stores before the SQL backend wrote, schema version 1): sessions in their order, operator
    state, a completed tick, a held lease, managed agents in their creation order, and the
    approvals table version 2 adds."""
    sessions, operators, agents = backend.sessions, backend.operators, backend.managed_agents
    assert [i.id for i in await sessions.list_sessions()] == ["first", "second"]
    assert [m.content for m in await sessions.load("first")] == [
        "Where is Paris?",
        "In France.",
        "And Rome?",
        "In Italy.",
    ]
    await sessions.append("second", [Message.assistant("Hi.")])
    infos = await sessions.list_sessions()
    assert [(i.id, i.message_count, i.title) for i in infos] == [
        ("second", 2, "Hello"),
        ("first", 4, "Where is Paris?"),
    ]
    page = await sessions.load_page("second", limit=1)
    assert (page.start, [r.message.content for r in page.records]) == (1, ["Hi."])
    assert await operators.get_state("operator:news:state") == {"seen": [1, 2]}
    assert await operators.claim_tick("news", 100, "host-b", 60) is False  # completed
    assert await operators.renew_lease("run:x", "host-a", 60) is True
    assert [a.id for a in await agents.list()] == ["geo", "alpha"]  # by creation time
    assert await agents.count() == 2
    geo = await agents.get("geo")
    assert geo is not None
    assert geo.system_prompt == "Geography."
    call = StoredApproval(agent_id="geo", id="call_1", tool="delete_file", arguments="{}")
    assert await backend.approvals.add(call) == call
    assert await backend.approvals.pending("geo", limit=10) == [call]
