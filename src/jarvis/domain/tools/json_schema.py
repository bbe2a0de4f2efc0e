"""A small JSON-Schema validator for tool arguments.

Tool arguments come from a model, so they are checked against the tool's schema before the
tool runs and every problem is reported back in words the model can act on. The subset
covers what tool schemas use (and what pydantic generates for typed functions): ``type``,
``enum``, ``const``, ``required``, ``properties``, ``additionalProperties``, ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum`` and the
exclusive variants, ``pattern``, ``anyOf``/``oneOf``/``allOf`` and local ``$ref``
(``#/$defs/...``). Unknown keywords are ignored, as JSON Schema prescribes.

It is pure stdlib so it costs nothing on the CLI start path (the ``jsonschema`` package
takes far longer to import than a whole tool run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from jarvis.domain.json_types import JSONObject, JSONValue

_MAX_ERRORS = 8


def json_type_name(value: object) -> str:
    """The JSON type of ``value`` as JSON Schema names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: object, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list | tuple)
    if expected == "null":
        return value is None
    return True  # an unknown type name constrains nothing


def _type_problem(value: object, expected: object) -> str | None:
    """Why ``value`` is not of the ``type`` keyword's type(s), or ``None``."""
    if isinstance(expected, str):
        wanted = [expected]
    elif isinstance(expected, list) and expected:
        wanted = [str(t) for t in expected]
    else:
        return None
    if any(_is_type(value, t) for t in wanted):
        return None
    return f"expected {' or '.join(wanted)}, got {json_type_name(value)}"


_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)[*+{?]")
"""A group holding a quantifier that is itself quantified (``(a+)+``): on some strings
Python's backtracking matcher takes time exponential in their length."""


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` compiled, or ``None``: not a pattern, or one that is not checked here
    because matching it may take exponential time (a tool's schema may come from an MCP
    server; the tool still checks its own input)."""
    if _NESTED_QUANTIFIER.search(pattern) is not None:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _TooComplex(Exception):
    """The check took more than :data:`MAX_STEPS` steps."""


MAX_STEPS = 20_000
"""The most schema nodes one check visits: ``anyOf`` inside ``anyOf`` through ``$ref``
(a server's schema of 1 kB) would otherwise take time exponential in its depth."""


class _Validator:
    __slots__ = ("errors", "known", "root", "steps")

    def __init__(self, root: Mapping[str, object], parent: _Validator | None = None) -> None:
        self.root = root
        self.errors: list[str] = []
        self.steps: list[int] = [0] if parent is None else parent.steps
        """Shared with the probes of ``anyOf``/``oneOf``: one budget for the whole check."""
        self.known: dict[tuple[int, int], bool] = {} if parent is None else parent.known
        """Whether a value matches a subschema, by their ids (both live as long as the
        check): a subschema reached again through ``$ref`` is not checked again."""

    def fail(self, path: str, message: str) -> None:
        if len(self.errors) < _MAX_ERRORS:
            self.errors.append(f"{path or '$'}: {message}")

    def resolve(self, schema: Mapping[str, object]) -> Mapping[str, object]:
        seen = 0
        while "$ref" in schema and seen < 16:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                return {}
            target: object = self.root
            for part in ref[1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return {}
                target = target[part]
            if not isinstance(target, Mapping):
                return {}
            schema = target
            seen += 1
        return schema

    def check(self, value: object, schema: object, path: str) -> None:
        self.steps[0] += 1
        if self.steps[0] > MAX_STEPS:
            raise _TooComplex
        if schema is False:
            self.fail(path, "no value is allowed here")
            return
        if not isinstance(schema, Mapping):
            return
        schema = self.resolve(schema)

        problem = _type_problem(value, schema.get("type"))
        if problem is not None:
            self.fail(path, problem)
            return

        if "const" in schema and value != schema["const"]:
            self.fail(path, f"must be {_short(schema['const'])}")
        enum = schema.get("enum")
        if isinstance(enum, list) and value not in enum:
            self.fail(path, "must be one of " + ", ".join(_short(v) for v in enum))

        if isinstance(value, dict):
            self.check_object(value, schema, path)
        elif isinstance(value, list | tuple):
            self.check_array(value, schema, path)
        elif isinstance(value, str):
            self.check_string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.check_number(value, schema, path)

        self.check_combinators(value, schema, path)

    def check_object(
        self, value: dict[object, object], schema: Mapping[str, object], path: str
    ) -> None:
        properties = schema.get("properties")
        props: Mapping[str, object] = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        if isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in value:
                    self.fail(path, f"missing required property '{name}'")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and key in props:
                self.check(item, props[key], child)
            elif extra is False:
                allowed = ", ".join(props) or "none"
                self.fail(child, f"unexpected property (allowed: {allowed})")
            elif isinstance(extra, Mapping):
                self.check(item, extra, child)

    def check_array(
        self, value: list[object] | tuple[object, ...], schema: Mapping[str, object], path: str
    ) -> None:
        low = schema.get("minItems")
        if isinstance(low, int) and len(value) < low:
            self.fail(path, f"needs at least {low} items, got {len(value)}")
        high = schema.get("maxItems")
        if isinstance(high, int) and len(value) > high:
            self.fail(path, f"allows at most {high} items, got {len(value)}")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                self.check(item, items, f"{path}[{index}]")

    def check_string(self, value: str, schema: Mapping[str, object], path: str) -> None:
        low = schema.get("minLength")
        if isinstance(low, int) and len(value) < low:
            self.fail(path, f"must be at least {low} characters long")
        high = schema.get("maxLength")
        if isinstance(high, int) and len(value) > high:
            self.fail(path, f"must be at most {high} characters long")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            compiled = _compiled(pattern)
            if compiled is not None and compiled.search(value) is None:
                self.fail(path, f"must match the pattern {pattern!r}")

    def check_number(self, value: float, schema: Mapping[str, object], path: str) -> None:
        for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = schema.get(keyword)
            if not isinstance(bound, int | float) or isinstance(bound, bool):
                continue
            if keyword == "minimum" and value < bound:
                self.fail(path, f"must be >= {bound}")
            elif keyword == "maximum" and value > bound:
                self.fail(path, f"must be <= {bound}")
            elif keyword == "exclusiveMinimum" and value <= bound:
                self.fail(path, f"must be > {bound}")
            elif keyword == "exclusiveMaximum" and value >= bound:
                self.fail(path, f"must be < {bound}")

    def check_combinators(self, value: object, schema: Mapping[str, object], path: str) -> None:
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            for sub in all_of:
                self.check(value, sub, path)
        for keyword in ("anyOf", "oneOf"):
            options = schema.get(keyword)
            if not isinstance(options, list) or not options:
                continue
            matches = 0
            for sub in options:  # stops as soon as the outcome is known
                matches += self.matches(value, sub)
                if matches == (1 if keyword == "anyOf" else 2):
                    break
            if matches == 0:
                self.fail(path, f"matches none of the allowed shapes ({keyword})")
            elif keyword == "oneOf" and matches > 1:
                self.fail(path, "matches more than one of the allowed shapes (oneOf)")

    def matches(self, value: object, schema: object) -> bool:
        key = (id(value), id(schema))
        known = self.known.get(key)
        if known is None:
            probe = _Validator(self.root, self)
            probe.check(value, schema, "")
            known = self.known[key] = not probe.errors
        return known


def validate(value: JSONValue, schema: JSONObject) -> list[str]:
    """Every way ``value`` breaks ``schema`` (at most a handful), as ``path: problem`` lines.

    An empty list means the value is valid. Never raises, whatever the schema holds.
    """
    validator = _Validator(schema)
    try:
        validator.check(value, schema, "")
    except RecursionError:
        return ["$: the value is nested too deeply to check"]
    except _TooComplex:
        return [f"$: the tool's schema is too complex to check (over {MAX_STEPS} steps)"]
    return validator.errors
