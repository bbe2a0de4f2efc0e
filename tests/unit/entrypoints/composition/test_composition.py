"""The composition root's seam: every use case comes from the ``Runtime`` that ``bootstrap``
returns, on the parts an ``Overrides`` value gave it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jarvis.application.ask import AskQuestion, ToolProvider
from jarvis.application.config import JarvisConfig
from jarvis.application.managed_agents import ManagedAgentSpec
from jarvis.domain.approval_store import StoredApproval
from jarvis.domain.managed_agents import owner_of
from jarvis.domain.operators import Operator
from jarvis.domain.owners import OwnerGoneError
from jarvis.domain.ports import InferencePort, ReplPort, ToolPort
from jarvis.entrypoints.composition import Overrides, Runtime, bootstrap
from jarvis.entrypoints.http.state import ServeLimits
from jarvis.testing import InMemoryRepl, InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from jarvis.testing.operators import InMemoryOperatorStore


def runtime_on(engine: ScriptedInference, overrides: Overrides) -> Runtime:
    return bootstrap(JarvisConfig(), inference=engine, overrides=overrides)


async def test_the_given_persona_and_session_store_are_the_conversations() -> None:
    engine = ScriptedInference(["Paris."])
    sessions = InMemorySessionStore()
    runtime = runtime_on(
        engine, Overrides(sessions=sessions, persona=lambda _selection: "PERSONA-GIVEN")
    )
    try:
        conversations = await runtime.conversations()
        turn = await conversations.ask("s1", AskQuestion(question="Capital of France?"))
        assert turn.answer.content == "Paris."
        assert "PERSONA-GIVEN" in engine.requests[0].messages[0].content
        assert [r.message.content for r in await sessions.load_records("s1")][-2:] == [
            "Capital of France?",
            "Paris.",
        ]
        assert runtime.sessions() is sessions
        assert [info.id for info in await runtime.session_list().list_sessions()] == ["s1"]
    finally:
        await runtime.aclose()


async def test_operators_start_no_engine_until_a_tick() -> None:
    engine = ScriptedInference(["Checked."])
    store = InMemoryOperatorStore()
    runtime = runtime_on(
        engine, Overrides(sessions=InMemorySessionStore(owners=store.holds), operator_store=store)
    )
    try:
        operators = runtime.operators()
        await operators.add(Operator(id="watch", agent="operative", prompt="Check the logs."))
        assert [o.id for o in await operators.list()] == ["watch"]
        assert engine.requests == []  # reading and writing definitions asks no engine
        answer = await operators.tick("watch")
        assert answer.content == "Checked."
        assert len(engine.requests) == 1
        assert operators.asker is not None
        assert operators.asker().registry is runtime.agents()
    finally:
        await runtime.aclose()


async def test_managed_agents_keep_their_definitions_in_the_given_store() -> None:
    agents = InMemoryManagedAgentStore()
    runtime = runtime_on(
        ScriptedInference(["Hello."]),
        Overrides(sessions=InMemorySessionStore(owners=agents.holds), managed_agent_store=agents),
    )
    try:
        managed = runtime.managed_agents(ServeLimits())
        created = await managed.create(ManagedAgentSpec(name="greeter"))
        assert await agents.get(created.id) == created
        await managed.post(created.id, "Hi")
        assert (await managed.run(created.id)).content == "Hello."
    finally:
        await runtime.aclose()


async def test_runs_over_in_memory_stores_record_approvals_only_for_their_own_agent() -> None:
    agents = InMemoryManagedAgentStore()
    runtime = runtime_on(
        ScriptedInference(),
        Overrides(sessions=InMemorySessionStore(owners=agents.holds), managed_agent_store=agents),
    )
    call = StoredApproval(agent_id="a", id="c0", tool="delete_file", arguments="{}")
    try:
        managed = runtime.managed_agents(ServeLimits())
        owner = owner_of(await managed.create(ManagedAgentSpec(id="a")))
        assert managed.approvals is not None
        assert await managed.approvals.store.add(call, owner=owner) == call
        await managed.delete("a")
        await managed.create(ManagedAgentSpec(id="a"))
        with pytest.raises(OwnerGoneError):
            await managed.approvals.store.add(call, owner=owner)
        assert await managed.approvals.pending("a") == []
    finally:
        await runtime.aclose()


class _CountingTools:
    """A tool catalogue around the configured one that counts what it is asked to build."""

    def __init__(self, inner: ToolProvider | None) -> None:
        assert inner is not None
        self.inner = inner
        self.built: list[str] = []

    def build(
        self, names: Sequence[str], *, inference: InferencePort, model: str
    ) -> list[ToolPort]:
        self.built.extend(names)
        return self.inner.build(names, inference=inference, model=model)

    async def prepare(self, names: Sequence[str]) -> None:
        await self.inner.prepare(names)


async def test_the_wrapped_tools_and_repl_are_what_the_agents_get() -> None:
    engine = ScriptedInference(['{"tool": "calculator", "input": {"expression": "6*7"}}', "42."])
    wrapped: list[_CountingTools] = []
    fake_repl = InMemoryRepl()
    repls: list[ReplPort] = []

    def wrap_tools(inner: ToolProvider | None) -> ToolProvider:
        wrapped.append(_CountingTools(inner))
        return wrapped[-1]

    def wrap_repl(inner: ReplPort) -> ReplPort:
        repls.append(inner)
        return fake_repl

    runtime = runtime_on(engine, Overrides(wrap_tools=wrap_tools, wrap_repl=wrap_repl))
    try:
        assert runtime.tools() is wrapped[0]
        assert runtime.repl() is fake_repl
        assert len(repls) == 1  # the configured REPL, wrapped once
        service = await runtime.service()
        await service.ask(AskQuestion(question="6*7?", agent="orchestrator", tools=("calculator",)))
        assert wrapped[0].built == ["calculator"]
    finally:
        await runtime.aclose()


def test_overrides_name_only_parts_the_container_has() -> None:
    container = bootstrap(JarvisConfig()).container
    for name in Overrides.__dataclass_fields__:
        if not name.startswith("wrap_"):
            assert name in container.providers, name
        else:
            assert name.removeprefix("wrap_") in container.providers, name


def test_an_unknown_overrides_field_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Overrides(engine=ScriptedInference())  # type: ignore[call-arg]  # the test's point
