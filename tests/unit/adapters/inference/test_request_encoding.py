"""The engines' request bodies: orjson's bytes, the standard library's for what it refuses."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from jarvis.adapters.inference._json import encode
from jarvis.domain.json_types import JSONValue

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES: st.SearchStrategy[JSONValue] = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _stdlib(value: JSONValue) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")


@given(_VALUES)
def test_a_body_reads_back_as_the_value_the_standard_library_would_have_sent(
    value: JSONValue,
) -> None:
    assert json.loads(encode(value)) == json.loads(_stdlib(value))


def test_a_lone_surrogate_is_sent_as_a_replacement_character_not_refused() -> None:
    body = encode({"messages": [{"role": "assistant", "content": "Paris \ud800."}]})
    assert json.loads(body) == {"messages": [{"role": "assistant", "content": "Paris ?."}]}


def test_an_integer_past_64_bits_is_sent_whole() -> None:
    assert encode({"seed": 2**70}) == b'{"seed":1180591620717411303424}'


def test_non_ascii_text_is_sent_as_utf8_and_compact() -> None:
    assert encode({"q": "é 日本", "n": [1, 2.5]}) == '{"q":"é 日本","n":[1,2.5]}'.encode()


def test_a_float_no_json_parser_reads_is_sent_as_null() -> None:
    assert encode({"temperature": float("nan")}) == b'{"temperature":null}'


def test_a_float_no_json_parser_reads_is_null_on_the_standard_librarys_path_too() -> None:
    """orjson refuses the lone surrogate, so the standard library writes this body."""
    body = encode({"arguments": {"x": float("nan"), "y": [float("-inf"), 1.5]}, "c": "\ud800"})
    assert body == b'{"arguments":{"x":null,"y":[null,1.5]},"c":"?"}'
