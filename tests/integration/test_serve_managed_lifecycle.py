"""A managed agent deleted while it answers, then created again under the same id, over real
``jarvis serve`` processes on one SQLite store: the old run's answer never reaches the new
agent. Deleted through the server that runs it, the run is cancelled at once; deleted
through another server, the run answers to its end and the store refuses the answer.

The gated engine holds the answer after its first word until the test releases it, so the
deletion and the re-creation always land while the old run is streaming.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.integration.test_serve_approvals import frames
from tests.support.gated_engine import MODEL, GatedEngine
from tests.support.serve_process import jarvis_serve

pytestmark = pytest.mark.integration

TIMEOUT = 60.0


def text_of(frame: tuple[str, str]) -> str:
    """The answer's text a frame carries ("" for any other frame)."""
    name, data = frame
    if name != "message" or not data.startswith("{"):
        return ""
    choices = json.loads(data).get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


@pytest.mark.parametrize("deleted_on", ["the same server", "another server"])
def test_an_agent_deleted_mid_answer_leaves_nothing_to_its_successor(
    jarvis_home: Path, deleted_on: str
) -> None:
    with ExitStack() as stack:
        engine = stack.enter_context(GatedEngine())
        args = ("--engine", "openai", "--base-url", engine.url, "--model", MODEL)
        running = stack.enter_context(jarvis_serve(*args))
        other = (
            stack.enter_context(jarvis_serve(*args)) if deleted_on != "the same server" else running
        )
        client = stack.enter_context(httpx.Client(timeout=TIMEOUT))
        client.post(
            running.url + "/v1/managed-agents", json={"id": "victim", "system_prompt": "Old."}
        ).raise_for_status()
        with client.stream(
            "POST",
            running.url + "/v1/managed-agents/victim/messages",
            json={"content": "What is the secret?", "stream": True},
        ) as reply:
            events = frames(reply.iter_lines())
            assert next(text for text in map(text_of, events) if text) == "The"  # under way
            assert client.delete(other.url + "/v1/managed-agents/victim").status_code == 200
            client.post(
                other.url + "/v1/managed-agents", json={"id": "victim", "system_prompt": "New."}
            ).raise_for_status()
            if deleted_on == "another server":
                engine.release()  # its run was not stopped: it answers, the store refuses
            rest = list(events)
        engine.release()
        url = running.url + "/v1/managed-agents/victim/messages"
        messages = client.get(url).json()["data"]
        again = client.post(url, json={"content": "Hello?", "stream": True}).text
        after = client.get(url).json()["data"]
    assert messages == []  # neither the old question nor the old answer
    [error] = [json.loads(data)["error"] for name, data in rest if name == "error"]
    if deleted_on == "the same server":
        assert error["code"] == "cancelled"
        assert "'victim' was deleted while it ran: the run was cancelled" in error["message"]
        assert "".join(map(text_of, rest)) == ""  # the rest of the answer never came
    else:
        assert error["code"] == "agent_not_found"
        assert "managed agent 'victim' was deleted while it ran" in error["message"]
        assert "not stored" in error["message"]
    assert rest[-1] == ("message", "[DONE]")
    assert "Traceback" not in again
    assert [(m["role"], m["content"]) for m in after] == [
        ("user", "Hello?"),
        ("assistant", "The capital of France is Paris."),
    ]
