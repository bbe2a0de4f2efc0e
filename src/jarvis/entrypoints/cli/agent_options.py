"""``-O KEY=VALUE``: agent options from the command line, decoded and checked before any run.

A value that is JSON (``5``, ``true``, ``{"a": 1}``) is decoded, anything else stays a
string. Python's JSON decoder accepts ``NaN`` and ``Infinity`` and turns ``1e400`` into
infinity; non-finite numbers are refused wherever they appear. The checks of the values are
the application's (:mod:`jarvis.application.agent_options`, the same for the SDK); this
module only says what went wrong in the words of the command line (``--agent-option
key=value: ...``), before anything starts.
"""

from __future__ import annotations

import json
import math

from jarvis.application.agent_options import (
    BOOLEAN_OPTIONS,
    NUMBER_OPTIONS,
    RESERVED_OPTIONS,
    value_problem,
)
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue

__all__ = ["BOOLEAN_OPTIONS", "NUMBER_OPTIONS", "RESERVED_OPTIONS", "parse_agent_options"]


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
    problem = value_problem(key, value)
    if problem is None:
        return
    rule = NUMBER_OPTIONS.get(key)
    example = f"{rule.low:g}" if rule is not None else "false"
    raise ConfigurationError(
        f"--agent-option {key}={raw}: {problem}.", hint=f"Example: -O {key}={example}"
    )


def parse_agent_options(values: list[str]) -> JSONObject:
    """``KEY=VALUE`` pairs as agent options, each decoded and checked."""
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
