"""``-O KEY=VALUE``: agent options from the command line, decoded and checked before any run.

A value that is JSON (``5``, ``true``, ``{"a": 1}``) is decoded, anything else stays a
string. Python's JSON decoder accepts ``NaN`` and ``Infinity`` and turns ``1e400`` into
infinity; a budget of ``max_seconds=NaN`` compares false with everything and silently
switches the budget off, so non-finite numbers are refused wherever they appear. The
numeric options of the built-in agents are checked against their range, and the
constructor parameters that take internal objects (the REPL, its limits, the event bus...)
cannot be set from the command line at all: they would crash the run instead of
configuring it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue


@dataclass(frozen=True, slots=True)
class NumberRule:
    """An option that takes a number from ``low`` to ``high`` (both included)."""

    low: float
    high: float
    integer: bool = True

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"{kind} from {self.low:g} to {self.high:g}"

    def accepts(self, value: JSONValue) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        return math.isfinite(value) and self.low <= value <= self.high


NUMBER_OPTIONS: dict[str, NumberRule] = {
    "max_turns": NumberRule(1, 10_000),
    "max_seconds": NumberRule(0.001, 86_400, integer=False),
    "max_total_tokens": NumberRule(1, 1_000_000_000),
    "max_parse_errors": NumberRule(1, 1_000),
    "max_output_chars": NumberRule(1, 100_000_000),
    "sub_temperature": NumberRule(0, 2, integer=False),
    "sub_max_tokens": NumberRule(1, 1 << 20),
    "sub_concurrency": NumberRule(1, 64),
    "max_sub_calls": NumberRule(0, 100_000),
    "max_prompt_tokens": NumberRule(1, 1 << 24),
    "max_prefetch_urls": NumberRule(0, 20),
    "prefetch_max_chars": NumberRule(1, 100_000_000),
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
"""Constructor parameters that are not agent options, and what to use instead."""


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _decode(key: str, raw: str) -> JSONValue:
    """``raw`` as JSON, else the string itself; a non-finite number is refused."""
    try:
        value: JSONValue = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except ValueError as exc:
        if "finite number" not in str(exc):
            return raw
        raise ConfigurationError(
            f"--agent-option {key}={raw}: {exc}.",
            hint=_range_hint(key) or "Numbers must be finite.",
        ) from None
    return value


def _range_hint(key: str) -> str:
    rule = NUMBER_OPTIONS.get(key)
    return f"{key} takes {rule.describe()}." if rule is not None else ""


def check_option(key: str, value: JSONValue, raw: str) -> None:
    """Refuse a reserved option, or a known option whose value is out of its range."""
    if key in RESERVED_OPTIONS:
        raise ConfigurationError(
            f"--agent-option {key} cannot be set on the command line.",
            hint=f"For {key}, {RESERVED_OPTIONS[key]}.",
        )
    rule = NUMBER_OPTIONS.get(key)
    if rule is not None and not rule.accepts(value):
        raise ConfigurationError(
            f"--agent-option {key}={raw}: {key} takes {rule.describe()}.",
            hint=f"Example: -O {key}={rule.low:g}",
        )
    if key in BOOLEAN_OPTIONS and not isinstance(value, bool):
        raise ConfigurationError(
            f"--agent-option {key}={raw}: {key} takes true or false.",
            hint=f"Example: -O {key}=false",
        )


def parse_agent_options(values: list[str]) -> JSONObject:
    """``KEY=VALUE`` pairs as agent keyword arguments, each decoded and checked."""
    options: JSONObject = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigurationError(
                f"--agent-option '{item}' is not KEY=VALUE.", hint="Example: -O mode=structured"
            )
        value = _decode(key, raw)
        check_option(key, value, raw)
        options[key] = value
    return options
