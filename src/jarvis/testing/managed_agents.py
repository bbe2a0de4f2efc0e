"""``InMemoryManagedAgentStore``: managed agent definitions kept in a dict."""

from __future__ import annotations

from jarvis.domain.managed_agents import (
    DEFINITION_PREFIX,
    ManagedAgent,
    Position,
    agent_to_record,
    check_agent_id,
    definition_owner,
    owner_of,
    position_of,
)
from jarvis.domain.owners import Owner


def _check(agent: ManagedAgent) -> None:
    """Refuse what the real stores refuse: an invalid id, an oversized definition."""
    check_agent_id(agent.id)
    agent_to_record(agent)


class InMemoryManagedAgentStore:
    """Behaves like the real stores (same id rule, same size bound), without a database."""

    def __init__(self) -> None:
        self._agents: dict[str, ManagedAgent] = {}

    def holds(self, owner: Owner) -> bool:
        """Whether ``owner`` is a definition stored here, with its incarnation (pass it as
        the ``owners`` of the :class:`~jarvis.testing.InMemorySessionStore` that keeps the
        agents' conversations, as the SQL stores share one database); for a vacancy,
        whether no definition of its id is stored. A key that is no managed agent's is
        never held (another store answers for it)."""
        if not owner.key.startswith(DEFINITION_PREFIX):
            return False
        agent = self._agents.get(owner.key.removeprefix(DEFINITION_PREFIX))
        if owner.vacant:
            return agent is None
        return agent is not None and agent.incarnation == owner.incarnation

    async def put(self, agent: ManagedAgent) -> None:
        _check(agent)
        self._agents[agent.id] = agent

    async def create(self, agent: ManagedAgent) -> bool:
        _check(agent)
        if agent.id in self._agents:
            return False
        self._agents[agent.id] = agent  # no await since the check: nothing came between
        return True

    async def update(self, agent: ManagedAgent) -> bool:
        _check(agent)
        if not self.holds(owner_of(agent)):
            return False
        self._agents[agent.id] = agent
        return True

    async def get(self, agent_id: str) -> ManagedAgent | None:
        return self._agents.get(check_agent_id(agent_id))

    async def list(
        self, *, after: Position | None = None, limit: int | None = None
    ) -> list[ManagedAgent]:
        agents = sorted(self._agents.values(), key=position_of)
        if after is not None:
            agents = [a for a in agents if position_of(a) > after]
        return agents if limit is None else agents[:limit]

    async def count(self) -> int:
        return len(self._agents)

    async def delete(self, agent_id: str, incarnation: str) -> bool:
        if not self.holds(definition_owner(check_agent_id(agent_id), incarnation)):
            return False
        del self._agents[agent_id]
        return True
