"""``jarvis ask -c`` / ``--session`` and ``jarvis sessions``, as processes against a scripted
engine whose request log shows what each question carried."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call


def jarvis(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def ask(engine: ScriptedEngine, *args: str) -> subprocess.CompletedProcess[str]:
    return jarvis("ask", "--base-url", engine.url, "-m", MODEL, *args)


def contents(messages: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(m["role"], m.get("content")) for m in messages]


def test_ask_continue_sends_the_first_exchange_with_the_second_question() -> None:
    with ScriptedEngine([Reply("Paris."), Reply("About 2 million."), Reply("Rome.")]) as engine:
        first = ask(engine, "-c", "Capital of France?")
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == "Paris."
        second = ask(engine, "-c", "Its population?")
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "About 2 million."
        third = ask(engine, "Capital of Italy?")  # no -c: a new conversation
        assert third.returncode == 0, third.stderr
    sent = engine.messages(1)
    assert contents(sent[1:]) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Its population?"),
    ]
    assert contents(engine.messages(2)[1:]) == [("user", "Capital of Italy?")]


def test_named_sessions_are_kept_apart_and_verbose_says_what_entered_the_prompt(
    jarvis_home: Path,
) -> None:
    (jarvis_home / "config.toml").write_text("[sessions]\nhistory_messages = 2\n")
    with ScriptedEngine([Reply("A1."), Reply("B1."), Reply("A2."), Reply("A3.")]) as engine:
        assert ask(engine, "--session", "a", "qa1").returncode == 0
        assert ask(engine, "--session", "b", "qb1").returncode == 0
        assert ask(engine, "--session", "a", "qa2").returncode == 0
        third = ask(engine, "--session", "a", "-v", "--no-stream", "qa3")
        assert third.returncode == 0, third.stderr
    assert contents(engine.messages(2)[1:]) == [
        ("user", "qa1"),
        ("assistant", "A1."),
        ("user", "qa2"),
    ]
    assert contents(engine.messages(3)[1:]) == [
        ("user", "qa2"),
        ("assistant", "A2."),
        ("user", "qa3"),
    ]
    assert "history of session 'a': 2 messages" in third.stderr
    assert "2 older left out" in third.stderr


def test_json_output_names_the_session() -> None:
    with ScriptedEngine([Reply("Paris.")]) as engine:
        result = ask(engine, "--session", "j1", "--json", "Capital?")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["session"] == "j1"
    assert data["content"] == "Paris."


def test_tool_calls_are_replayed_with_their_ids_and_results() -> None:
    call = tool_call("call_abc", "calculator", {"expression": "2+2"})
    script = [Reply(tool_calls=[call]), Reply("It is 4."), Reply("Yes.")]
    with ScriptedEngine(script) as engine:
        tools = ("-a", "orchestrator", "--tools", "calculator")
        first = ask(engine, *tools, "-c", "What is 2+2?")
        assert first.returncode == 0, first.stderr
        assert "It is 4." in first.stdout
        second = ask(engine, *tools, "-c", "Sure?")
        assert second.returncode == 0, second.stderr
    sent = engine.messages(2)[1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    replayed = sent[1]["tool_calls"]
    assert isinstance(replayed, list)
    assert replayed[0]["id"] == "call_abc"
    assert replayed[0]["function"]["name"] == "calculator"
    assert json.loads(replayed[0]["function"]["arguments"]) == {"expression": "2+2"}
    assert sent[2]["tool_call_id"] == "call_abc"
    assert sent[2]["content"] == "4"
    assert sent[3]["content"] == "It is 4."


def test_sessions_list_show_export_delete_json() -> None:
    call = tool_call("call_1", "calculator", {"expression": "6*7"})
    with ScriptedEngine([Reply(tool_calls=[call]), Reply("42."), Reply("Hi.")]) as engine:
        tools = ("-a", "orchestrator", "--tools", "calculator")
        assert ask(engine, *tools, "--session", "maths", "What is 6*7?").returncode == 0
        assert ask(engine, "--session", "hello", "Hello there").returncode == 0

    listed = jarvis("sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["id"] for r in rows] == ["hello", "maths"]
    assert rows[1]["message_count"] == 4
    assert rows[1]["title"] == "What is 6*7?"

    shown = jarvis("sessions", "show", "maths", "--json")
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == "call_1"
    assert messages[2] | {"at": 0, "time": ""} == {
        "role": "tool",
        "content": "42",
        "tool_call_id": "call_1",
        "name": "calculator",
        "at": 0,
        "time": "",
    }
    assert messages[3]["model"] == MODEL
    # the run's usage, summed over its two inferences, on its answer
    assert messages[3]["usage"] == {"prompt_tokens": 18, "completion_tokens": 6}

    text = jarvis("sessions", "show", "maths")
    assert "calculator" in text.stdout
    assert "[call_1]" in text.stdout

    exported = jarvis("sessions", "export", "maths")
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["role"] for line in lines] == ["user", "assistant", "tool", "assistant"]
    assert jarvis("sessions", "export", "maths", "--json").returncode == 0

    deleted = jarvis("sessions", "delete", "maths", "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"deleted": "maths"}
    assert [r["id"] for r in json.loads(jarvis("sessions", "list", "--json").stdout)] == ["hello"]


@pytest.mark.parametrize("command", ["show", "delete", "export"])
def test_an_unknown_session_is_exit_2_listing_the_existing_ones(command: str) -> None:
    with ScriptedEngine([Reply("x")]) as engine:
        assert ask(engine, "--session", "kept-one", "q").returncode == 0
    result = jarvis("sessions", command, "nope")
    assert result.returncode == 2
    assert "No session named 'nope'" in result.stderr
    assert "kept-one" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_session_options_are_usage_errors() -> None:
    with ScriptedEngine([Reply("x")]) as engine:
        both = ask(engine, "-c", "--session", "a", "q")
        bad = ask(engine, "--session", "../escape", "q")
        assert engine.requests == []
    assert both.returncode == 2
    assert "cannot be used together" in both.stderr
    assert bad.returncode == 2
    assert "Invalid session id" in bad.stderr


def test_a_damaged_database_is_exit_7_and_left_untouched(jarvis_home: Path) -> None:
    database = jarvis_home / "sessions.db"
    garbage = b"this is not a database\n" * 200
    database.write_bytes(garbage)
    with ScriptedEngine([Reply("x")]) as engine:
        result = ask(engine, "-c", "q")
        plain = ask(engine, "q")  # kept by default: the same
        assert engine.requests == []  # nothing asked that could not be kept
        ephemeral = ask(engine, "--no-keep", "q")  # stores nothing: answered
    assert ephemeral.returncode == 0, ephemeral.stderr
    listed = jarvis("sessions", "list")
    for outcome in (result, plain, listed):
        assert outcome.returncode == 7, outcome.stderr
        assert "damaged" in outcome.stderr
        assert str(database) in outcome.stderr
        assert "Traceback" not in outcome.stderr
    assert database.read_bytes() == garbage
    assert sorted(p.name for p in jarvis_home.iterdir()) == ["sessions.db"]


def test_a_locked_database_is_exit_3_and_loses_nothing(jarvis_home: Path) -> None:
    (jarvis_home / "config.toml").write_text("[sessions]\nbusy_timeout = 0.2\n")
    with ScriptedEngine([Reply("First."), Reply("Second.")]) as engine:
        assert ask(engine, "--session", "s", "one").returncode == 0
        holder = sqlite3.connect(jarvis_home / "sessions.db", isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            locked = ask(engine, "--session", "s", "two")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        again = ask(engine, "--session", "s", "two")
    assert locked.returncode == 3, locked.stderr
    assert "locked" in locked.stderr
    assert again.returncode == 0, again.stderr
    shown = json.loads(jarvis("sessions", "show", "s", "--json").stdout)
    assert [m["content"] for m in shown["messages"]] == ["one", "First.", "two", "Second."]


def test_an_unreachable_postgres_is_exit_3_naming_the_url_without_its_password(
    jarvis_home: Path,
) -> None:
    url = "postgresql://jarvis:s3cr3t-pw@127.0.0.1:1/jarvis"
    (jarvis_home / "config.toml").write_text(f'[sessions]\nbackend = "postgres"\nurl = "{url}"\n')
    with ScriptedEngine([Reply("x")]) as engine:
        result = ask(engine, "-c", "q")
    listed = jarvis("sessions", "list", "-v")
    for outcome in (result, listed):
        assert outcome.returncode == 3, outcome.stderr
        assert "127.0.0.1:1" in outcome.stderr
        assert "s3cr3t-pw" not in outcome.stderr
        assert "***" in outcome.stderr


def _modules_after(*argv: str) -> set[str]:
    code = (
        "import sys\n"
        f"sys.argv = ['jarvis', *{list(argv)!r}]\n"
        "from jarvis.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(__import__('json').dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    assert isinstance(loaded, list)
    return set(loaded)


def test_an_ephemeral_question_never_loads_the_session_store(jarvis_home: Path) -> None:
    # a plain ask is kept (so that -c continues it); --no-keep and keep_asks = false are
    # what store nothing and load nothing of the store
    store_modules = {
        "sqlite3",
        "jarvis.adapters.sql_store.sqlite_driver",
        "jarvis.application.conversation",
        "prompt_toolkit",
    }
    with ScriptedEngine([Reply("x")]) as engine:
        base = ("ask", "--base-url", engine.url, "-m", MODEL)
        ephemeral = _modules_after(*base, "--no-keep", "q")
        also_ephemeral = _modules_after(*base, "--ephemeral", "q")
        plain = _modules_after(*base, "q")
        continued = _modules_after(*base, "-c", "q")
        (jarvis_home / "config.toml").write_text("[sessions]\nkeep_asks = false\n")
        configured = _modules_after(*base, "q")
    for loaded in (ephemeral, also_ephemeral, configured):
        assert not loaded & store_modules
    for loaded in (plain, continued):
        assert {"sqlite3", "jarvis.adapters.sql_store.sqlite_driver"} <= loaded
        assert "prompt_toolkit" not in loaded


def test_a_plain_ask_is_kept_so_that_ask_c_continues_it(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("Paris."), Reply("About 2 million.")]) as engine:
        first = ask(engine, "--json", "Capital of France?")
        second = ask(engine, "-c", "-v", "Its population?")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    created = json.loads(first.stdout)["session"]
    assert f"session: continuing the last conversation, {created}" in second.stderr
    assert contents(engine.messages(1)[1:]) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Its population?"),
    ]
    listed = json.loads(jarvis("sessions", "list", "--json").stdout)
    assert [(r["id"], r["message_count"]) for r in listed] == [(created, 4)]


def test_verbose_names_the_session_a_plain_ask_created() -> None:
    with ScriptedEngine([Reply("Paris.")]) as engine:
        result = ask(engine, "-v", "Capital of France?")
    assert result.returncode == 0, result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("session: a new conversation")]
    created = line.rsplit(", ", 1)[1]
    assert [r["id"] for r in json.loads(jarvis("sessions", "list", "--json").stdout)] == [created]


@pytest.mark.parametrize("how", ["--no-keep", "--ephemeral", "config"])
def test_an_ask_that_is_not_kept_stores_nothing_and_c_starts_afresh(
    jarvis_home: Path, how: str
) -> None:
    if how == "config":
        (jarvis_home / "config.toml").write_text("[sessions]\nkeep_asks = false\n")
    flags = () if how == "config" else (how,)
    with ScriptedEngine([Reply("Paris."), Reply("Hm?")]) as engine:
        first = ask(engine, *flags, "--json", "Capital of France?")
        second = ask(engine, "-c", "Its population?")
    assert first.returncode == 0, first.stderr
    assert "session" not in json.loads(first.stdout)
    assert second.returncode == 0, second.stderr
    assert contents(engine.messages(1)[1:]) == [("user", "Its population?")]
    assert len(json.loads(jarvis("sessions", "list", "--json").stdout)) == 1  # the -c one


def test_no_keep_with_a_session_is_a_usage_error() -> None:
    with ScriptedEngine([Reply("x")]) as engine:
        for flags in (("-c",), ("--session", "s")):
            result = ask(engine, "--no-keep", *flags, "q")
            assert result.returncode == 2, result.stderr
            assert "--no-keep cannot be used" in result.stderr
        assert engine.requests == []


def test_an_invalid_sessions_section_is_exit_2_naming_the_accepted_values(
    jarvis_home: Path,
) -> None:
    (jarvis_home / "config.toml").write_text('[sessions]\nbackend = "mongo"\n')
    result = jarvis("sessions", "list")
    assert result.returncode == 2
    assert "sessions.backend" in result.stderr
    assert "sqlite" in result.stderr
    (jarvis_home / "config.toml").write_text("[sessions]\nhistory_messages = -1\n")
    result = jarvis("sessions", "list")
    assert result.returncode == 2
    assert "sessions.history_messages" in result.stderr


def chat_piped(*args: str, lines: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", "chat", *args],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_chat_reads_one_message_a_line_from_a_pipe_and_stores_the_session() -> None:
    with ScriptedEngine([Reply("One."), Reply("Two.")]) as engine:
        result = chat_piped(
            "--base-url", engine.url, "-m", MODEL, "--session", "piped", lines="first\nsecond\n"
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["One.", "Two."]
    assert contents(engine.messages(1)[1:]) == [
        ("user", "first"),
        ("assistant", "One."),
        ("user", "second"),
    ]


def test_chat_reports_an_engine_that_is_down_goes_on_and_ends_with_its_code() -> None:
    """A script that pipes questions in learns that they went unanswered: the chat goes on
    after each failure, and ends with the first one's exit code (3: engine unavailable)."""
    result = chat_piped("--base-url", "http://127.0.0.1:9/v1", "-m", MODEL, lines="one\ntwo\n")
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("127.0.0.1:9") >= 2  # each question says why it got no answer
    assert "2 questions of this chat got no answer" in result.stderr
    assert "Traceback" not in result.stderr
    assert jarvis("sessions", "list", "--json").stdout.strip() == "[]"  # nothing stored


def test_conversations_on_a_real_postgresql_are_shared_by_every_jarvis_using_it(
    jarvis_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.postgres_server import running_postgres

    with running_postgres() as server:
        url = server.create_database()
        (jarvis_home / "config.toml").write_text(
            f'[sessions]\nbackend = "postgres"\nurl = "{url}"\n'
        )
        other = tmp_path / "other-machine"  # another config dir, the same server
        other.mkdir()
        (other / "config.toml").write_text(f'[sessions]\nbackend = "postgres"\nurl = "{url}"\n')
        with ScriptedEngine([Reply("Paris."), Reply("Rome.")]) as engine:
            assert ask(engine, "--session", "shared", "Capital of France?").returncode == 0
            monkeypatch.setenv("OPENJARVIS_HOME", str(other))
            second = ask(engine, "--session", "shared", "And of Italy?")
            listed = jarvis("sessions", "list", "--json")
        assert second.returncode == 0, second.stderr
        assert contents(engine.messages(1)[1:]) == [
            ("user", "Capital of France?"),
            ("assistant", "Paris."),
            ("user", "And of Italy?"),
        ]
        assert [(r["id"], r["message_count"]) for r in json.loads(listed.stdout)] == [("shared", 4)]
        assert not (jarvis_home / "sessions.db").exists()


def test_a_question_too_large_to_keep_is_answered_and_not_kept() -> None:
    question = "x" * (9 * 1024 * 1024)  # a stored message holds at most 8 MiB
    with ScriptedEngine([Reply("Long read.")]) as engine:
        result = subprocess.run(
            [sys.executable, "-m", "jarvis", "ask", "--base-url", engine.url, "-m", MODEL],
            input=question,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "Long read."
    assert "too large to keep as a session" in result.stderr
    assert jarvis("sessions", "list", "--json").stdout.strip() == "[]"


def open_chat(*args: str) -> subprocess.Popen[str]:
    """``jarvis chat ARGS...`` with its three streams as pipes the test writes and reads."""
    return subprocess.Popen(
        [sys.executable, "-m", "jarvis", "chat", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_ends_a_piped_chat_waiting_for_its_next_line() -> None:
    """stdin stays open and silent: the chat waits for a line, and SIGTERM still ends it
    at once (exit 130), with what was answered before kept."""
    with ScriptedEngine([Reply("One.")]) as engine:
        chat = open_chat("--base-url", engine.url, "-m", MODEL)
        try:
            assert chat.stdin is not None
            assert chat.stdout is not None
            chat.stdin.write("first\n")
            chat.stdin.flush()
            assert chat.stdout.readline() == "One.\n"  # answered; now it waits for a line
            chat.send_signal(signal.SIGTERM)
            chat.wait(timeout=60)  # stdin still open: it cannot be an end of input
            assert chat.stderr is not None
            err = chat.stderr.read()
        finally:
            if chat.stdin is not None:
                chat.stdin.close()
            if chat.poll() is None:
                chat.kill()
                chat.wait()
    assert chat.returncode == 130, err
    assert "jarvis: interrupted" in err
    assert "Traceback" not in err
    kept = json.loads(jarvis("sessions", "list", "--json").stdout)
    assert [s["message_count"] for s in kept] == [2]


def test_a_piped_chat_whose_turn_the_store_could_not_keep_goes_on_then_exits_3(
    jarvis_home: Path,
) -> None:
    """The test holds the SQLite write lock (``BEGIN IMMEDIATE`` on its own connection)
    past the chat's 0.2 s busy timeout while the chat answers ``two``, and lets it go
    before writing ``three``: ``two`` is shown, said lost, and the chat goes on; its exit
    code then tells the script that piped it that the session lacks a turn."""
    (jarvis_home / "config.toml").write_text("[sessions]\nbusy_timeout = 0.2\n")
    with ScriptedEngine([Reply("First."), Reply("Second."), Reply("Third.")]) as engine:
        assert ask(engine, "--session", "s", "one").returncode == 0
        holder = sqlite3.connect(jarvis_home / "sessions.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        chat = open_chat("--base-url", engine.url, "-m", MODEL, "--session", "s")
        try:
            assert chat.stdin is not None
            assert chat.stderr is not None
            chat.stdin.write("two\n")
            chat.stdin.flush()
            said: list[str] = []
            while not said or "stayed locked" not in said[-1]:  # the append gave up
                line = chat.stderr.readline()
                assert line, "".join(said)
                said.append(line)
            holder.execute("ROLLBACK")  # the store is free again for the next turn
            chat.stdin.write("three\n")
            chat.stdin.close()  # the end of the chat's input
            assert chat.stdout is not None
            out, err = chat.stdout.read(), chat.stderr.read()  # both small: no deadlock
            chat.wait(timeout=60)
        finally:
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
            if chat.poll() is None:
                chat.kill()
                chat.wait()
    err = "".join(said) + err
    assert chat.returncode == 3, err
    assert out.splitlines() == ["Second.", "Third."]  # both shown
    assert "this turn is not in session s; the chat goes on" in err
    assert "1 turn of this chat could not be saved to the session store" in err
    assert "Traceback" not in err
    shown = json.loads(jarvis("sessions", "show", "s", "--json").stdout)
    assert [m["content"] for m in shown["messages"]] == ["one", "First.", "three", "Third."]


def test_a_piped_chat_reads_bytes_that_are_not_utf8_as_replacement_characters() -> None:
    with ScriptedEngine([Reply("Read.")]) as engine:
        result = subprocess.run(
            [sys.executable, "-m", "jarvis", "chat", "--base-url", engine.url, "-m", MODEL],
            input=b"caf\xe9 \\\r\nau lait\r\n",
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert contents(engine.messages(0)[1:]) == [("user", "caf\ufffd \nau lait")]
