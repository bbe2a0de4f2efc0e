"""The labelled-action parser: anchored, case-insensitive, JSON-aware, never raising."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from jarvis.domain.json_types import JSONObject
from jarvis.domain.protocols.react_parser import (
    STRUCTURED_LABELS,
    ParsedAction,
    ParsedError,
    ParsedFinal,
    parse_reply,
    render_action,
    render_final,
)


def action(text: str) -> ParsedAction:
    parsed = parse_reply(text)
    assert isinstance(parsed, ParsedAction), parsed
    return parsed


def final(text: str) -> str:
    parsed = parse_reply(text)
    assert isinstance(parsed, ParsedFinal), parsed
    return parsed.answer


def test_a_plain_react_step() -> None:
    parsed = action('Thought: add them\nAction: calculator\nAction Input: {"expression": "2+2"}')
    assert parsed.tool == "calculator"
    assert parsed.arguments == {"expression": "2+2"}
    assert parsed.thought == "add them"


def test_labels_are_case_insensitive_and_markdown_tolerant() -> None:
    parsed = action('THOUGHT: x\n**Action:** Calculator\n**action input**: {"expression": "1"}')
    assert parsed.tool == "Calculator"
    assert parsed.arguments == {"expression": "1"}


def test_labels_inside_words_or_mid_line_do_not_count() -> None:
    assert final("Transaction: 42 dollars were moved.") == "Transaction: 42 dollars were moved."
    assert final("The next Action: is up to you.") == "The next Action: is up to you."


def test_an_action_before_a_final_answer_wins_and_the_imagined_observation_is_dropped() -> None:
    text = (
        'Thought: compute\nAction: calculator\nAction Input: {"expression": "6*7"}\n'
        "Observation: 42\nThought: done\nFinal Answer: 42"
    )
    parsed = action(text)
    assert parsed.arguments == {"expression": "6*7"}
    assert parsed.text[: parsed.end].endswith('{"expression": "6*7"}')
    assert "Observation" not in parsed.text[: parsed.end]


def test_a_final_answer_before_an_action_wins() -> None:
    assert final("Final Answer: 4\nAction: calculator") == "4\nAction: calculator"


def test_multi_line_json_with_blank_lines_in_a_code_fence() -> None:
    text = (
        'Action: write\nAction Input:\n```json\n{\n  "path": "a.txt",\n\n'
        '  "lines": [1,\n\n 2]\n}\n```\nObservation: ok'
    )
    parsed = action(text)
    assert parsed.arguments == {"path": "a.txt", "lines": [1, 2]}
    assert parsed.text[: parsed.end].endswith("```")


def test_json_on_the_action_line_or_the_next_line() -> None:
    assert action('Action: calculator {"expression": "1+1"}').arguments == {"expression": "1+1"}
    assert action('Action: calculator({"expression": "1"})').arguments == {"expression": "1"}
    assert action('Action: calculator\n{"expression": "3"}').arguments == {"expression": "3"}


def test_non_json_input_is_kept_raw_and_missing_input_is_empty() -> None:
    parsed = action("Action: search\nAction Input: weather in Paris\nObservation: sunny")
    assert parsed.arguments is None
    assert parsed.raw_input == "weather in Paris"
    assert action("Action: clock").arguments == {}


def test_malformed_json_input_is_kept_raw() -> None:
    parsed = action('Action: calculator\nAction Input: {"expression": "2+2"\nObservation: 4')
    assert parsed.arguments is None
    assert parsed.raw_input.startswith('{"expression": "2+2"')


def test_double_encoded_arguments_are_decoded() -> None:
    assert action('Action: c\nAction Input: "{\\"x\\": 1}"').arguments == {"x": 1}


def test_json_envelopes_bare_or_fenced_or_after_a_thought() -> None:
    assert action('{"action": "calc", "action_input": {"x": 1}}').arguments == {"x": 1}
    assert action('```json\n{"tool": "calc", "arguments": {"x": 2}}\n```').tool == "calc"
    assert action('{"name": "calc", "arguments": {"x": 3}}').arguments == {"x": 3}
    assert action(
        'Thought: use it\n```json\n{"action": "calc", "action_input": "{\\"x\\": 4}"}\n```'
    ).arguments == {"x": 4}
    assert final('{"final_answer": "Paris"}') == "Paris"
    assert final('{"action": "Final Answer", "action_input": "Paris"}') == "Paris"


def test_final_answer_as_an_action() -> None:
    assert final('Thought: ok\nAction: Final Answer\nAction Input: "Paris"') == "Paris"


def test_plain_text_is_the_answer_and_think_blocks_are_stripped() -> None:
    assert final("<think>hmm</think>\nParis is the capital.") == "Paris is the capital."
    assert final('Here is JSON: {"a": 1}') == 'Here is JSON: {"a": 1}'


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty"),
        ("Thought: I am still thinking", "neither"),
        ("Action: \nAction Input: {}", "no tool name"),
        ("Final Answer:   ", "empty"),
    ],
)
def test_protocol_shaped_replies_without_a_usable_step_are_errors(text: str, error: str) -> None:
    parsed = parse_reply(text)
    assert isinstance(parsed, ParsedError)
    assert error in parsed.error


def test_structured_text_labels() -> None:
    parsed = parse_reply(
        'THOUGHT: go\nTOOL: calculator\nARGUMENTS: {"expression": "9"}', STRUCTURED_LABELS
    )
    assert isinstance(parsed, ParsedAction)
    assert (parsed.tool, parsed.arguments) == ("calculator", {"expression": "9"})
    done = parse_reply("THOUGHT: ok\nFINAL_ANSWER: nine", STRUCTURED_LABELS)
    assert done == ParsedFinal(answer="nine", thought="ok")


# --- properties ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,20}", fullmatch=True)
single_lines = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=40
)
react_words = st.sampled_from(
    [
        "Thought:",
        "Action:",
        "Action Input:",
        "Final Answer:",
        "Observation:",
        "```json",
        "```",
        "{",
        "}",
        '"',
        "\n",
        "\n\n",
        "<think>",
        "</think>",
        "calculator",
        '{"a": 1}',
        "[",
        ":",
    ]
)


@given(st.text())
def test_the_parser_never_raises_on_arbitrary_text(text: str) -> None:
    assert isinstance(parse_reply(text), ParsedAction | ParsedFinal | ParsedError)


@given(st.lists(react_words | st.text(max_size=6), max_size=30).map("".join))
def test_the_parser_never_raises_on_react_shaped_noise(text: str) -> None:
    parsed = parse_reply(text)
    assert isinstance(parsed, ParsedAction | ParsedFinal | ParsedError)
    if isinstance(parsed, ParsedAction):
        assert parsed.tool
        assert 0 <= parsed.end <= len(parsed.text)


@given(tool=tool_names, arguments=json_objects, thought=single_lines)
def test_rendered_actions_round_trip(tool: str, arguments: JSONObject, thought: str) -> None:
    assume("think>" not in thought)
    parsed = action(render_action(tool, arguments, thought.strip()))
    assert parsed.tool == tool
    assert parsed.arguments == arguments


@given(answer=st.text(min_size=1), thought=single_lines)
def test_rendered_final_answers_round_trip(answer: str, thought: str) -> None:
    assume(answer.strip() and "think>" not in answer and "think>" not in thought)
    assert final(render_final(answer, thought.strip())) == answer.strip()


@given(st.text(alphabet=string.ascii_letters + " .,!?0123456789", min_size=1))
def test_plain_sentences_are_final_answers(text: str) -> None:
    assume(text.strip())
    assert final(text) == text.strip()
