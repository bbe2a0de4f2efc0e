"""Typed answers: the schema an answer must match, and how a reply is checked against it.

The schema is a value object (:class:`OutputSchema`), checked once when it is made: a
schema jarvis cannot honour (not a JSON object, too large or too deep, a ``$ref`` that
leaves the document, a root that is not an object, a keyword the checker cannot enforce) is
a usage error that says why, before any engine is asked. What a valid answer *becomes* is
the business of an :class:`OutputParser` (a pure function over the decoded JSON): the plain
JSON Schema check of :mod:`jarvis.domain.tools.json_schema` here, or a pydantic ``TypeAdapter``
for a Python type (in the application layer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import ResponseFormat
from jarvis.domain.tools.json_schema import validate

MAX_SCHEMA_BYTES = 64 * 1024
"""A schema is sent with every attempt (and in the prompt): larger ones are refused."""
MAX_SCHEMA_DEPTH = 32
"""How deeply a schema document may nest (objects and arrays)."""
MAX_REPLY_CHARS = 1_000_000
"""A reply longer than this is not decoded (the engines bound replies far below it)."""
DEFAULT_OUTPUT_RETRIES = 2
MAX_OUTPUT_RETRIES = 10
MAX_ERRORS_SHOWN = 8

UNCHECKED_KEYWORDS = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "prefixItems",
        "contains",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
        "$dynamicRef",
        "$recursiveRef",
    }
)
"""Keywords of a JSON Schema that :mod:`jarvis.domain.tools.json_schema` does not enforce: a
schema given as a dict that uses one is refused (an answer would pass unchecked)."""

_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_SCHEMA_VALUES = ("items", "additionalProperties")
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)

T_co = TypeVar("T_co", covariant=True)


class OutputSchemaError(ConfigurationError):
    """A schema jarvis cannot honour; the message says why (a usage error)."""


class InvalidOutput(Exception):
    """A reply that is not a valid answer; ``errors`` say how, in words a model can use."""

    def __init__(self, errors: tuple[str, ...]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSchema:
    """A checked JSON Schema for an answer, with its name and its compact text."""

    schema: JSONObject
    name: str
    text: str
    """The schema as compact JSON (the prompt shows it)."""
    strict: bool
    """Whether OpenAI's strict mode accepts it (every object closed, every property required)."""

    @classmethod
    def of(cls, schema: object, *, name: str = "", check_keywords: bool = True) -> OutputSchema:
        """The checked schema; :class:`OutputSchemaError` says why one cannot be used.

        ``check_keywords``: refuse keywords the JSON Schema checker cannot enforce (off for a
        schema generated from a Python type, which pydantic validates itself).
        """
        if not isinstance(schema, dict):
            raise OutputSchemaError(
                f"The answer's schema must be a JSON object (a JSON Schema), not {_kind(schema)}.",
                hint='For example: {"type": "object", "properties": {"name": {"type": "string"}}}',
            )
        try:
            text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise OutputSchemaError(f"The answer's schema is not JSON: {exc}.") from None
        if len(text.encode()) > MAX_SCHEMA_BYTES:
            raise OutputSchemaError(
                f"The answer's schema is larger than {MAX_SCHEMA_BYTES // 1024} KiB "
                f"({len(text.encode()):,} bytes).",
                hint="Split the answer, or describe fewer fields.",
            )
        checked: JSONObject = json.loads(text)
        _check_structure(checked, check_keywords=check_keywords)
        _check_root_object(checked)
        title = checked.get("title")
        chosen = name or (title if isinstance(title, str) else "") or "answer"
        return cls(
            schema=checked,
            name=(_NAME.sub("_", chosen).strip("_") or "answer")[:64],
            text=text,
            strict=_strict_compatible(checked),
        )

    def response_format(self) -> ResponseFormat:
        """The engine request's structured-output form of this schema."""
        return ResponseFormat(schema=self.schema, name=self.name, strict=self.strict)


class OutputParser(Protocol[T_co]):
    """Turns a decoded JSON reply into the answer's value, or raises :class:`InvalidOutput`."""

    def parse(self, value: JSONValue) -> T_co: ...


class SchemaParser:
    """The JSON value itself, checked against the schema (a schema given as a dict)."""

    __slots__ = ("schema",)

    def __init__(self, schema: OutputSchema) -> None:
        self.schema = schema

    def parse(self, value: JSONValue) -> JSONValue:
        errors = validate(value, self.schema.schema)
        if errors:
            raise InvalidOutput(tuple(errors[:MAX_ERRORS_SHOWN]))
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSpec(Generic[T_co]):
    """What a typed question wants back: the schema, its parser, and how many times an
    invalid reply is sent back with its errors before the run fails."""

    schema: OutputSchema
    parser: OutputParser[T_co]
    retries: int = DEFAULT_OUTPUT_RETRIES

    def __post_init__(self) -> None:
        if not 0 <= self.retries <= MAX_OUTPUT_RETRIES:
            raise ConfigurationError(
                f"output_retries must be between 0 and {MAX_OUTPUT_RETRIES}, got {self.retries}."
            )


def schema_spec(schema: object, *, retries: int = DEFAULT_OUTPUT_RETRIES) -> OutputSpec[JSONValue]:
    """The spec of an answer described by a JSON Schema dict (its value is the JSON)."""
    checked = OutputSchema.of(schema)
    return OutputSpec(schema=checked, parser=SchemaParser(checked), retries=retries)


def decode_reply(text: str) -> JSONValue:
    """The JSON a reply holds: the whole reply, else inside a code fence, else from its first
    ``{`` to its last ``}`` (small models wrap JSON in prose). Linear in the reply's length."""
    if len(text) > MAX_REPLY_CHARS:
        raise InvalidOutput((f"$: the reply is longer than {MAX_REPLY_CHARS:,} characters",))
    stripped = text.strip()
    if not stripped:
        raise InvalidOutput(("$: the reply is empty; a JSON object is required",))
    candidates = [stripped]
    fenced = _FENCE.match(stripped)
    if fenced is not None:
        candidates.append(fenced.group(1).strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    first_error = ""
    for candidate in candidates:
        try:
            value: JSONValue = json.loads(candidate)
        except (ValueError, RecursionError) as exc:
            first_error = first_error or str(exc)
            continue
        return value
    raise InvalidOutput((f"$: the reply is not JSON ({first_error})",))


def answer_instruction(schema: OutputSchema) -> str:
    """What the question gets appended: the answer's shape, for every engine and agent."""
    return (
        "Answer with one JSON object that matches this JSON Schema, and nothing else "
        "(no prose, no code fence):\n" + schema.text
    )


def feedback(errors: tuple[str, ...]) -> str:
    """The message that sends an invalid reply back to the model."""
    listed = "\n".join(f"- {error}" for error in errors[:MAX_ERRORS_SHOWN])
    return (
        "Your answer does not match the required JSON Schema:\n"
        f"{listed}\n"
        "Reply again with only the corrected JSON object."
    )


# --- checks ----------------------------------------------------------------------------


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _subschemas(schema: Mapping[str, JSONValue]) -> Iterator[tuple[str, JSONValue]]:
    """Each schema-valued child of ``schema``, with the keyword path that leads to it."""
    for key in _SCHEMA_MAPS:
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield f"{key}.{name}", child
    for key in _SCHEMA_LISTS:
        options = schema.get(key)
        if isinstance(options, list):
            for index, child in enumerate(options):
                yield f"{key}[{index}]", child
    for key in _SCHEMA_VALUES:
        child = schema.get(key)
        if isinstance(child, dict):
            yield key, child


def _depth_of(value: JSONValue) -> int:
    """How deeply ``value`` nests, counted without recursion."""
    deepest = 0
    stack: list[tuple[JSONValue, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_SCHEMA_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_structure(root: JSONObject, *, check_keywords: bool) -> None:
    if _depth_of(root) > MAX_SCHEMA_DEPTH:
        raise OutputSchemaError(
            f"The answer's schema nests deeper than {MAX_SCHEMA_DEPTH} levels.",
            hint="Flatten the answer's shape.",
        )
    stack: list[tuple[str, JSONValue]] = [("$", root)]
    while stack:
        path, schema = stack.pop()
        if isinstance(schema, bool):
            continue
        if not isinstance(schema, dict):
            raise OutputSchemaError(
                f"The answer's schema has {_kind(schema)} where a schema belongs ({path})."
            )
        ref = schema.get("$ref")
        if ref is not None:
            _check_ref(root, ref, path)
        if check_keywords:
            for keyword in schema:
                if keyword in UNCHECKED_KEYWORDS:
                    raise OutputSchemaError(
                        f"The answer's schema uses '{keyword}' ({path}), which jarvis cannot "
                        "check: an answer breaking it would pass as valid.",
                        hint="Drop the keyword, or express it with type, enum, properties, "
                        "required, items, anyOf or the length and range keywords.",
                    )
        stack.extend((f"{path}.{key}", child) for key, child in _subschemas(schema))


def _resolve(root: JSONObject, ref: str) -> JSONValue | None:
    target: JSONValue = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            return None
        target = target[part]
    return target


def _check_ref(root: JSONObject, ref: JSONValue, path: str) -> None:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise OutputSchemaError(
            f"The answer's schema refers outside itself ($ref {json.dumps(ref)} at {path}): "
            "jarvis fetches nothing.",
            hint="Put the referenced schema under $defs and refer to it as #/$defs/NAME.",
        )
    if not isinstance(_resolve(root, ref), dict | bool):
        raise OutputSchemaError(
            f"The answer's schema refers to {ref}, which it does not define ({path})."
        )


def _check_root_object(root: JSONObject) -> None:
    schema: JSONValue = root
    for _ in range(MAX_SCHEMA_DEPTH):
        if not isinstance(schema, dict) or "$ref" not in schema:
            break
        ref = schema["$ref"]
        schema = _resolve(root, ref) if isinstance(ref, str) else None
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "object" or (
        kind is None and isinstance(schema, dict) and isinstance(schema.get("properties"), dict)
    ):
        return
    raise OutputSchemaError(
        'The answer\'s schema must describe a JSON object ("type": "object"), '
        f"not {json.dumps(kind) if kind is not None else 'an unspecified type'}: engines "
        "constrain answers that are objects.",
        hint='Wrap the value: {"type": "object", "properties": {"value": ...}, '
        '"required": ["value"]}',
    )


def _strict_compatible(root: JSONObject) -> bool:
    stack: list[JSONValue] = [root]
    while stack:
        schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        properties = schema.get("properties")
        if schema.get("type") == "object" or isinstance(properties, dict):
            if schema.get("additionalProperties") is not False:
                return False
            names = set(properties) if isinstance(properties, dict) else set()
            required = schema.get("required", [])
            if not isinstance(required, list) or set(map(str, required)) != names:
                return False
        stack.extend(child for _, child in _subschemas(schema))
    return True
