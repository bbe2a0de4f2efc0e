"""The tool-argument validator: every keyword tool schemas use, and never a crash."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.json_schema import MAX_STEPS, validate

CALC: JSONObject = {
    "type": "object",
    "properties": {
        "expression": {"type": "string", "minLength": 1},
        "precision": {"type": "integer", "minimum": 0, "maximum": 10},
        "mode": {"enum": ["exact", "float"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["expression"],
    "additionalProperties": False,
}


def test_a_valid_object_has_no_errors() -> None:
    assert validate({"expression": "2+2", "precision": 3, "mode": "exact"}, CALC) == []


def test_each_violation_is_reported_with_its_path() -> None:
    errors = validate(
        {"expression": "", "precision": 11, "mode": "fast", "tags": ["a", 1, "c"], "x": 1},
        CALC,
    )
    assert "expression: must be at least 1 characters long" in errors
    assert "precision: must be <= 10" in errors
    assert any(e.startswith("mode: must be one of") for e in errors)
    assert "tags: allows at most 2 items, got 3" in errors
    assert "tags[1]: expected string, got integer" in errors
    assert any(e.startswith("x: unexpected property") for e in errors)


def test_missing_required_and_wrong_types() -> None:
    assert validate({}, CALC) == ["$: missing required property 'expression'"]
    assert validate({"expression": 5}, CALC) == ["expression: expected string, got integer"]
    assert validate([], CALC) == ["$: expected object, got array"]


def test_booleans_are_not_numbers_and_integral_floats_are_integers() -> None:
    schema: JSONObject = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert validate({"n": True}, schema) == ["n: expected integer, got boolean"]
    assert validate({"n": 2.0}, schema) == []
    assert validate({"n": 2.5}, schema) == ["n: expected integer, got number"]


def test_nested_objects_refs_and_combinators() -> None:
    schema: JSONObject = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "at": {"$ref": "#/$defs/Point"},
            "id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
            "either": {"type": ["string", "integer"]},
        },
    }
    assert (
        validate({"at": {"x": 1.5}, "id": None, "kind": "a", "code": "AB", "either": 3}, schema)
        == []
    )
    errors = validate({"at": {"x": "1"}, "id": 3, "kind": "c", "code": "ab", "either": []}, schema)
    assert "at.x: expected number, got string" in errors
    assert any(e.startswith("id: matches none") for e in errors)
    assert any(e.startswith("kind: matches none") for e in errors)
    assert "code: must match the pattern '^[A-Z]+$'" in errors
    assert "either: expected string or integer, got array" in errors


def test_additional_properties_schema_and_unknown_keywords() -> None:
    schema: JSONObject = {"type": "object", "additionalProperties": {"type": "integer"}, "x-ui": 1}
    assert validate({"a": 1, "b": 2}, schema) == []
    assert validate({"a": "1"}, schema) == ["a: expected integer, got string"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    value=json_values,
    schema=st.dictionaries(
        st.sampled_from(
            [
                "type",
                "properties",
                "required",
                "items",
                "enum",
                "minimum",
                "pattern",
                "$ref",
                "anyOf",
                "additionalProperties",
                "maxLength",
            ]
        ),
        json_values,
        max_size=4,
    ),
)
def test_never_raises_whatever_the_schema(value: object, schema: JSONObject) -> None:
    assert isinstance(validate(value, schema), list)  # type: ignore[arg-type]


def _chain(depth: int, combine: str) -> JSONObject:
    """A ``$defs`` chain ``depth`` deep, each level naming the one below twice (under
    ``anyOf`` or ``allOf``): about 70 bytes a level, and checked naively in time that
    doubles with each level."""
    defs: JSONObject = {"d0": {"type": "string"}}
    for level in range(1, depth + 1):
        below: JSONObject = {"$ref": f"#/$defs/d{level - 1}"}
        defs[f"d{level}"] = {combine: [{"allOf": [below, {"minLength": 99}]}, below]}
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"x": {"$ref": f"#/$defs/d{depth}"}},
    }


def test_a_schema_built_to_take_exponential_time_is_checked_in_bounded_steps() -> None:
    """A server's 2 kB schema would take hours: a subschema met again is not checked
    again (``anyOf``), and what still grows (``allOf``) stops at the step budget, with a
    message the model reads; it never raises."""
    any_of = _chain(30, "anyOf")
    assert validate({"x": "valid"}, any_of) == []
    assert validate({"x": 5}, any_of) == ["x: matches none of the allowed shapes (anyOf)"]
    all_of = _chain(30, "allOf")
    assert validate({"x": "valid"}, all_of) == [
        f"$: the tool's schema is too complex to check (over {MAX_STEPS} steps)"
    ]


def test_a_pattern_that_may_backtrack_exponentially_is_not_run() -> None:
    schema: JSONObject = {"type": "object", "properties": {"s": {"pattern": "^(a+)+$"}}}
    assert validate({"s": "a" * 64 + "!"}, schema) == []  # the tool checks its own input
    plain: JSONObject = {"type": "object", "properties": {"s": {"pattern": "^[a-z]+$"}}}
    assert validate({"s": "abc!"}, plain) == ["s: must match the pattern '^[a-z]+$'"]
