"""Reading a run's answer from its prompt's own reply: only when the events told of that
one assistant message (a late event of the previous run is not this run's), and the run
ends before ``session.idle`` only once every delta of the answer was streamed."""

from __future__ import annotations

from jarvis.adapters.opencode_server.wire import (
    RunState,
    answered_alone,
    caught_up,
    final_reply,
    session_of,
)
from jarvis.domain.external_runtime import ExternalTextDelta

SESSION = "ses_1"


def updated(message: str, parent: str, role: str = "assistant") -> dict[str, object]:
    info = {"id": message, "parentID": parent, "role": role, "sessionID": SESSION}
    return {"type": "message.updated", "properties": {"info": info}}


def part(part_id: str, kind: str = "text") -> dict[str, object]:
    return {
        "type": "message.part.updated",
        "properties": {"part": {"id": part_id, "type": kind, "sessionID": SESSION}},
    }


def delta(part_id: str, text: str) -> dict[str, object]:
    props = {"sessionID": SESSION, "partID": part_id, "field": "text", "delta": text}
    return {"type": "message.part.delta", "properties": props}


def reply(text: str, message: str = "msg_2", parent: str = "msg_1") -> dict[str, object]:
    return {
        "info": {
            "id": message,
            "parentID": parent,
            "role": "assistant",
            "tokens": {"input": 9, "output": 3},
            "finish": "stop",
        },
        "parts": [
            {"type": "step-start", "id": "prt_0"},
            {"type": "text", "id": "prt_1", "text": text},
            {"type": "step-finish", "id": "prt_2"},
        ],
    }


def fed(*events: object) -> RunState:
    state = RunState(session_id=SESSION)
    for event in events:
        state.feed(event)
    return state


def test_session_of_reads_every_place_opencode_puts_it() -> None:
    assert session_of(delta("p", "x")) == SESSION
    assert session_of(part("p")) == SESSION
    assert session_of(updated("msg_2", "msg_1")) == SESSION
    assert session_of({"type": "server.heartbeat", "properties": {}}) == ""
    assert session_of(["not", "an", "event"]) == ""


def test_the_reply_alone_is_the_answer_of_a_one_message_run() -> None:
    state = fed(updated("msg_1", "", role="user"), updated("msg_2", "msg_1"))
    answer = reply("Paris.")
    assert answered_alone(answer, state)
    done = final_reply([answer], state)
    assert done.content == "Paris."
    assert done.usage.prompt_tokens == 9
    assert done.usage.completion_tokens == 3
    assert done.turns == 1


def test_a_late_event_of_the_previous_run_does_not_count_as_this_runs() -> None:
    state = fed(updated("msg_0", "msg_before"), updated("msg_2", "msg_1"))
    assert answered_alone(reply("Paris."), state)


def test_a_tool_round_is_read_back_from_the_session() -> None:
    state = fed(updated("msg_2a", "msg_1"), updated("msg_2", "msg_1"))
    assert not answered_alone(reply("Paris."), state)
    assert not caught_up(reply("Paris."), state)


def test_a_lost_stream_or_no_event_reads_the_session_back() -> None:
    state = fed(updated("msg_2", "msg_1"))
    state.lost = True
    assert not answered_alone(reply("Paris."), state)
    assert not answered_alone(reply("Paris."), fed())
    assert not answered_alone({"info": {"role": "user", "id": "msg_2"}}, fed())


def test_caught_up_once_every_text_delta_is_streamed() -> None:
    state = fed(updated("msg_2", "msg_1"), part("prt_1"), delta("prt_1", "Par"))
    assert not caught_up(reply("Paris."), state)
    state.feed(delta("prt_1", "is."))
    assert caught_up(reply("Paris."), state)


def test_trailing_blanks_trimmed_from_the_stored_text_still_count_as_streamed() -> None:
    state = fed(updated("msg_2", "msg_1"), part("prt_1"), delta("prt_1", "Paris.\n\n"))
    assert caught_up(reply("Paris."), state)
    state = fed(updated("msg_2", "msg_1"), part("prt_1"), delta("prt_1", "Paris. More"))
    assert not caught_up(reply("Paris."), state)


def test_reasoning_left_to_stream_is_waited_for_though_not_streamed_as_text() -> None:
    answer = reply("Paris.")
    parts = answer["parts"]
    assert isinstance(parts, list)
    parts.append({"type": "reasoning", "id": "prt_r", "text": "Checked."})
    state = fed(updated("msg_2", "msg_1"), part("prt_1"), part("prt_r", kind="reasoning"))
    assert state.feed(delta("prt_1", "Paris.")) == [ExternalTextDelta(text="Paris.")]
    assert not caught_up(answer, state)
    assert state.feed(delta("prt_r", "Checked.")) == []
    assert caught_up(answer, state)
