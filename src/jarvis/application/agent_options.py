"""Agent options (``-O key=value``, the SDK's ``agent_options=``), checked once, here.

An agent reads the options it takes through :class:`OptionReader` (see
:mod:`jarvis.domain.loop.options`); every value handed out is checked first: its type,
its range (:data:`NUMBER_OPTIONS`), numbers finite wherever they appear (``NaN`` compares
false with everything: a budget of ``max_seconds=NaN`` would silently switch the budget
off). After the build, an option no agent read is refused, naming the agent, the option and
the options that agent takes. Constructor parameters that take internal objects (the REPL,
the event bus...) are not options at all (:data:`RESERVED_OPTIONS`): they would crash the
run instead of configuring it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from jarvis.application.config_bounds import plain_number
from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.loop.options import Choice


@dataclass(frozen=True, slots=True)
class NumberRule:
    """An option that takes a number from ``low`` to ``high`` (both included; ``None``:
    no upper bound)."""

    low: float
    high: float | None
    integer: bool = True

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        if self.high is None:
            return f"{kind} of at least {plain_number(self.low)}"
        return f"{kind} from {plain_number(self.low)} to {plain_number(self.high)}"

    def accepts(self, value: JSONValue) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value) or value < self.low:
            return False
        return self.high is None or value <= self.high


NUMBER_OPTIONS: dict[str, NumberRule] = {
    "max_turns": NumberRule(1, 10_000),
    "max_seconds": NumberRule(0.001, 86_400, integer=False),
    "max_total_tokens": NumberRule(1, 1_000_000_000),
    "max_parse_errors": NumberRule(1, 1_000),
    "max_output_chars": NumberRule(1, 100_000_000),
    "max_parallel_tools": NumberRule(1, None),
    "max_tool_calls_per_turn": NumberRule(1, None),
    "sub_temperature": NumberRule(0, 2, integer=False),
    "sub_max_tokens": NumberRule(1, 1 << 20),
    "sub_concurrency": NumberRule(1, 64),
    "max_sub_calls": NumberRule(0, 100_000),
    "max_prompt_tokens": NumberRule(1, 1 << 24),
    "max_prefetch_urls": NumberRule(0, 20),
    "prefetch_max_chars": NumberRule(1, 100_000_000),
    "history_messages": NumberRule(0, 1_000),
    "recall_top_k": NumberRule(1, 50),
}
"""The numeric options of the built-in agents (see ``jarvis ask --help``) and their ranges."""

BOOLEAN_OPTIONS = frozenset({"prefetch_urls"})

RESERVED_OPTIONS: dict[str, str] = {
    "temperature": "use --temperature",
    "max_tokens": "use --max-tokens",
    "system_prompt": "use --system",
    "persona_prompt": "use --persona",
    "tools": "use --tools",
    "model": "use --model",
    "repl_limits": "set the [repl] section of config.toml",
    "repl": "set the [repl] section of config.toml",
    "loop_guard": "it is not configurable",
    "bus": "it is not configurable",
    "inference": "use --engine and --base-url",
}
"""Settings that are not agent options, and what to use instead."""

ENGINE_OPTIONS = "options"
"""The option every agent takes: a JSON object passed to the engine with each request."""


def value_problem(key: str, value: JSONValue) -> str | None:
    """Why ``value`` cannot be option ``key`` (whatever the agent), or ``None``."""
    if key in RESERVED_OPTIONS:
        return f"{key} cannot be set as an agent option; for {key}, {RESERVED_OPTIONS[key]}"
    rule = NUMBER_OPTIONS.get(key)
    if rule is not None and not rule.accepts(value):
        return f"{key} takes {rule.describe()}"
    if key in BOOLEAN_OPTIONS and not isinstance(value, bool):
        return f"{key} takes true or false"
    if not _finite(value):
        return f"{key} holds a number that is not finite"
    return None


def _finite(value: JSONValue) -> bool:
    """No NaN or infinity anywhere in ``value`` (iterative: depth is no risk)."""
    pending: list[JSONValue] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


class OptionReader:
    """The named options of one agent build, checked as the agent reads them.

    ``defaults`` are used for options the question does not set (e.g. ``[agent]
    max_turns`` for ``max_turns``), but only for agents that read them.
    """

    def __init__(
        self,
        agent: str,
        given: Mapping[str, JSONValue],
        *,
        defaults: Mapping[str, JSONValue] | None = None,
    ) -> None:
        self.agent = agent
        self.given: JSONObject = dict(given)
        self.defaults: JSONObject = dict(defaults or {})
        self.read: list[str] = []
        """The options the agent read, in order: the options it takes."""
        for key, value in self.given.items():
            problem = value_problem(key, value)
            if problem is not None:
                raise self._error(problem)

    def _error(self, problem: str) -> ConfigurationError:
        return ConfigurationError(
            f"Agent '{self.agent}' cannot be built with these options: {problem}.",
            hint="Options given: " + shown(", ".join(sorted(self.given))),
        )

    def _get(self, key: str) -> JSONValue | None:
        if key not in self.read:
            self.read.append(key)
        if key in self.given:
            return self.given[key]
        return self.defaults.get(key)

    def _kind_error(self, key: str, value: JSONValue, kind: str) -> ConfigurationError:
        return self._error(f"{shown(key)} takes {kind}, not {shown(repr(value))}")

    def integer(self, key: str, default: int) -> int:
        value = self.optional_integer(key, None)
        return default if value is None else value

    def optional_integer(self, key: str, default: int | None) -> int | None:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._kind_error(key, value, "an integer")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.optional_number(key, None)
        return default if value is None else value

    def optional_number(self, key: str, default: float | None) -> float | None:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._kind_error(key, value, "a number")
        if not math.isfinite(value):
            raise self._kind_error(key, value, "a finite number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._kind_error(key, value, "true or false")
        return value

    def text(self, key: str, default: str | None) -> str | None:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._kind_error(key, value, "a string")
        return value

    def choice(
        self, key: str, choices: tuple[Choice, ...], default: Choice, *, what: str
    ) -> Choice:
        value = self._get(key)
        if value is None:
            return default
        for choice in choices:
            if value == choice:
                return choice
        given = f"'{value}'" if isinstance(value, str) else repr(value)
        raise ConfigurationError(
            f"Unknown {self.agent} {what} {shown(given)}.",
            hint="Choose one of: " + ", ".join(choices),
        )

    def engine_options(self) -> JSONObject:
        """The ``options`` every agent takes (a JSON object for the engine)."""
        value = self._get(ENGINE_OPTIONS)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._kind_error(ENGINE_OPTIONS, value, "a JSON object")
        return value

    def finish(self) -> None:
        """Refuse the options the agent did not read."""
        unknown = [key for key in self.given if key not in self.read]
        if unknown:
            accepted = ", ".join(sorted(self.read))
            raise self._error(
                f"unknown option{'s' if len(unknown) > 1 else ''} "
                + shown(", ".join(f"'{key}'" for key in unknown))
                + f"; the {self.agent} agent takes: {accepted}"
            )
