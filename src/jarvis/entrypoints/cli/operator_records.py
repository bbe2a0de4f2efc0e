"""What the ``jarvis operators`` commands build and show: a new operator from ``add``'s
options, the times of ticks, the lines of ``history``.

Loaded when one of those commands runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.operators` among them), not this one.
"""

from __future__ import annotations

from collections.abc import Sequence

from jarvis.application.schedules import check_cron
from jarvis.application.schedules import every as interval
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import Role
from jarvis.domain.operators import Operator, Schedule
from jarvis.domain.sessions.records import SessionMessage, stored_time, to_micros


def schedule_of(*, every: str | None, cron: str | None, tz: str) -> Schedule:
    """The schedule ``--every`` or ``--cron`` (in ``--tz``) gives; by hand with neither."""
    if every is not None and cron is not None:
        raise ConfigurationError("Give --every or --cron, not both.", hint="Example: --every 30m")
    if every is not None:
        return interval(every)
    if cron is not None:
        return check_cron(cron, tz)
    return Schedule()


def new_operator(
    name: str,
    *,
    agent: str,
    prompt: str,
    schedule: Schedule,
    tools: tuple[str, ...],
    agent_options: JSONObject,
    model: str | None,
    system_prompt: str | None,
) -> Operator:
    """The operator ``jarvis operators add NAME`` defines."""
    return Operator(
        id=name,
        agent=agent,
        prompt=prompt,
        schedule=schedule,
        tools=tools,
        agent_options=agent_options,
        model=model,
        system_prompt=system_prompt,
    )


def tick_time(micros: int | None) -> str:
    """A tick's time, local, to the second (``-`` for none)."""
    if micros is None:
        return "-"
    return stored_time(micros, local=True).strftime("%Y-%m-%d %H:%M:%S")


def history_json(records: Sequence[SessionMessage]) -> list[JSONObject]:
    """``history --json``: each tick's prompt and answer, with its model and time."""
    return [
        {
            "role": r.message.role.value,
            "content": r.message.content,
            "model": r.model,
            "at_us": to_micros(r.created_at),
        }
        for r in records
    ]


def history_lines(records: Sequence[SessionMessage]) -> list[str]:
    """``history``: one line a prompt (``tick``) or answer, with its time."""
    return [
        f"[{tick_time(to_micros(r.created_at))}] "
        f"{'tick' if r.message.role is Role.USER else 'answer'}: {r.message.content}"
        for r in records
    ]
