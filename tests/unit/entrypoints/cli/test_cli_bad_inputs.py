"""Hostile and odd inputs to ``jarvis ask``, in-process: each is a clear message and a
documented exit code, never a traceback and never a lost answer.

The inputs that would hang or exhaust the test process itself (``/dev/zero``, FIFOs, a
closed stdout) are tried on a real subprocess in ``tests/integration/test_cli_process.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis.application.config import MAX_TOKENS
from jarvis.domain.llm.completion import StreamChunk
from jarvis.domain.url_masks import mask_url, redact_urls
from jarvis.entrypoints.cli import app, question_input
from jarvis.entrypoints.cli import ask as ask_module
from jarvis.entrypoints.cli.agent_options import NUMBER_OPTIONS, RESERVED_OPTIONS
from jarvis.entrypoints.cli.errors import EXIT_ENGINE_UNAVAILABLE, EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.testing import InMemoryRepl, ScriptedInference


def wired(engine: ScriptedInference) -> Container:
    container = Container()
    container.inference.override(engine)
    container.repl.override(InMemoryRepl())
    return container


def run(
    container: Container, *args: str, input: str | bytes | None = None, charset: str = "utf-8"
) -> Result:
    return CliRunner(charset=charset).invoke(app, list(args), obj=container, input=input)


def assert_usage_error(result: Result, *words: str) -> None:
    assert result.exit_code == EXIT_USAGE, result.output
    for word in words:
        assert word in result.output, result.output
    assert "Traceback" not in result.output


class TestNumbers:
    @pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
    def test_temperature_must_be_finite(self, value: str) -> None:
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "--temperature", value, "q")
        assert_usage_error(result, "--temperature", "0<=x<=2")
        assert engine.requests == []

    def test_max_tokens_is_bounded(self) -> None:
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "--max-tokens", str(10**30), "q")
        assert_usage_error(result, "--max-tokens", f"{MAX_TOKENS}")
        assert engine.requests == []

    def test_the_cli_and_the_config_share_the_max_tokens_bound(self) -> None:
        assert ask_module.MAX_TOKENS_LIMIT == MAX_TOKENS

    @pytest.mark.parametrize(
        "option",
        [
            "max_seconds=NaN",
            "max_seconds=Infinity",
            "max_seconds=-Infinity",
            "max_seconds=1e400",
            "max_seconds=-1",
            "max_seconds=0",
            "max_turns=0",
            "max_turns=2.5",
            "max_turns=true",
            "max_turns=many",
            "max_total_tokens=-5",
            "max_turns=1000000000",
        ],
    )
    def test_budgets_must_be_finite_and_in_range(self, option: str) -> None:
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "-a", "orchestrator", "-O", option, "q")
        key = option.split("=", 1)[0]
        assert_usage_error(result, f"--agent-option {key}=", "from ")
        assert engine.requests == []

    def test_non_finite_numbers_are_refused_inside_json_values(self) -> None:
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "-O", 'options={"seed": NaN}', "q")
        assert_usage_error(result, "--agent-option options=", "not a finite number")

    @pytest.mark.parametrize("agent", ["rlm", "native_openhands"])
    @pytest.mark.parametrize(
        "option", ['repl_limits={"timeout_seconds": 1}', "repl={}", "loop_guard={}", "bus=1"]
    )
    def test_internal_parameters_are_not_options(self, agent: str, option: str) -> None:
        engine = ScriptedInference(["```python\nFINAL('x')\n```"])
        result = run(wired(engine), "ask", "-a", agent, "-O", option, "q")
        key = option.split("=", 1)[0]
        assert_usage_error(result, f"--agent-option {key} cannot be set")
        assert engine.requests == []

    def test_options_in_range_still_reach_the_agent(self) -> None:
        engine = ScriptedInference(["Paris."])
        result = run(
            wired(engine), "ask", "-a", "orchestrator", "-O", "max_seconds=30.5", "--json", "q"
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["content"] == "Paris."

    def test_every_checked_option_is_read_by_a_builtin_agent(self) -> None:
        from jarvis.application.agent_options import OptionReader
        from jarvis.application.registry import builtin_agents
        from jarvis.domain.loop.options import AgentParts

        read: set[str] = set()
        for key, cls in builtin_agents():
            if getattr(cls, "wraps_agent", False):  # built around an inner agent's options
                continue
            reader = OptionReader(key, {})
            parts = AgentParts(inference=ScriptedInference(), model="m", repl=InMemoryRepl())
            cls.from_options(parts, reader)
            read |= set(reader.read)
        assert set(NUMBER_OPTIONS) <= read
        assert not set(RESERVED_OPTIONS) & read

    @pytest.mark.parametrize(
        ("toml", "key", "accepted"),
        [
            ("[engine]\ntimeout = inf\n", "engine.timeout", "at most 86400"),
            ("[engine]\ntimeout = -inf\n", "engine.timeout", "greater than 0"),
            ("[engine]\ntimeout = 1e300\n", "engine.timeout", "at most 86400"),
            ("[agent]\ntemperature = nan\n", "agent.temperature", "at most 2"),
            ("[agent]\ntemperature = inf\n", "agent.temperature", "at most 2"),
            ("[repl]\ntimeout_seconds = inf\n", "repl.timeout_seconds", "at most 3600"),
            ("[agent]\nmax_tokens = 100000000000\n", "agent.max_tokens", "at most"),
        ],
    )
    def test_config_numbers_must_be_finite_and_in_range(
        self, jarvis_home: Path, toml: str, key: str, accepted: str
    ) -> None:
        (jarvis_home / "config.toml").write_text(toml, encoding="utf-8")
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "q")
        assert_usage_error(result, key, accepted)
        assert engine.requests == []


class TestText:
    def test_a_lone_surrogate_from_the_engine_keeps_the_rest_of_the_answer(self) -> None:
        """An engine the application hands in (its text not cleaned by an adapter): the
        surrogate is printed as U+FFFD, the rest as it is."""
        result = run(wired(ScriptedInference(["Paris \ud800 is the capital."])), "ask", "q")
        assert result.exit_code == 0, ascii(result.output)
        assert result.stdout == "Paris \ufffd is the capital.\n"

    def test_a_lone_surrogate_in_a_stream(self) -> None:
        chunks = [
            StreamChunk(content="Par"),
            StreamChunk(content="is\udc80"),
            StreamChunk(content="."),
        ]
        result = run(wired(ScriptedInference([chunks])), "ask", "q")
        assert result.exit_code == 0, ascii(result.output)
        assert result.stdout == "Paris\ufffd.\n"

    def test_a_lone_surrogate_in_json_stays_valid_json(self) -> None:
        result = run(wired(ScriptedInference(["Paris \ud800."])), "ask", "--json", "q")
        assert result.exit_code == 0, ascii(result.output)
        assert json.loads(result.stdout)["content"] == "Paris \ufffd."

    def test_an_ascii_only_stdout_gets_the_whole_answer(self) -> None:
        engine = ScriptedInference(["Bien sûr : Paris → France."])
        result = run(wired(engine), "ask", "--no-stream", "q", charset="ascii")
        assert result.exit_code == 0, result.output
        assert result.stdout == "Bien s\\xfbr : Paris \\u2192 France.\n"

    def test_an_ascii_only_stdout_gets_valid_json(self) -> None:
        engine = ScriptedInference(["Bien sûr."])
        result = run(wired(engine), "ask", "--json", "q", charset="ascii")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["content"] == "Bien sûr."

    def test_persona_json_on_an_ascii_only_stdout(self, jarvis_home: Path) -> None:
        (jarvis_home / "USER.md").write_text("- Name: Zoë, from Zürich\n", encoding="utf-8")
        result = run(Container(), "persona", "show", "--json", charset="ascii")
        assert result.exit_code == 0, result.output
        assert "Zoë, from Zürich" in json.dumps(json.loads(result.stdout), ensure_ascii=False)

    def test_undecodable_bytes_in_the_question_argument_become_replacement_characters(
        self,
    ) -> None:
        engine = ScriptedInference(["ok"])
        # what Python makes of the argument bytes b"caf\xe9?" (surrogateescape)
        result = run(wired(engine), "ask", "--system", "Be \udcffbrief.", "caf\udce9?")
        assert result.exit_code == 0, result.output
        messages = engine.requests[0].messages
        assert messages[-1].content == "caf\ufffd?"
        assert messages[0].content == "Be \ufffdbrief."

    def test_undecodable_bytes_on_stdin_become_replacement_characters(self) -> None:
        engine = ScriptedInference(["ok"])
        result = run(wired(engine), "ask", input=b"caf\xe9 au lait?\n")
        assert result.exit_code == 0, result.output
        assert engine.requests[0].messages[-1].content == "caf\ufffd au lait?"

    def test_a_question_on_stdin_is_read_with_a_cap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(question_input, "MAX_QUESTION_BYTES", 64)
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", input="x" * 65)
        assert_usage_error(result, "longer than 64 bytes", "--context-file")
        assert engine.requests == []


class TestFiles:
    def test_a_file_that_reports_size_zero_is_still_capped(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        status = Path("/proc/self/status")
        if not status.is_file() or status.stat().st_size != 0:
            pytest.skip("needs Linux /proc, whose files report a size of 0")
        monkeypatch.setattr(question_input, "MAX_CONTEXT_FILE_BYTES", 16)
        engine = ScriptedInference(["unused"])
        result = run(wired(engine), "ask", "-a", "rlm", "--context-file", str(status), "q")
        assert_usage_error(result, "too large", "more than 16 bytes")
        assert engine.requests == []

    def test_a_directory_as_context_file(self, tmp_path: Path) -> None:
        result = run(wired(ScriptedInference()), "ask", "--context-file", str(tmp_path), "q")
        assert result.exit_code == EXIT_USAGE
        assert "Traceback" not in result.output

    def test_a_config_file_over_the_cap(self, tmp_path: Path) -> None:
        path = tmp_path / "big.toml"
        path.write_text("# padding\n" * 200_000, encoding="utf-8")  # 2 MB of comments
        result = run(wired(ScriptedInference()), "ask", "--config", str(path), "q")
        assert_usage_error(result, "config file", "too large")

    def test_a_config_file_that_is_not_utf8(self, tmp_path: Path) -> None:
        path = tmp_path / "latin1.toml"
        path.write_bytes(b'[agent]\ndefault = "caf\xe9"\n')
        result = run(wired(ScriptedInference()), "ask", "--config", str(path), "q")
        assert_usage_error(result, str(path), "not UTF-8")


class TestCredentials:
    def test_an_unreachable_url_with_a_password_is_shown_without_it(
        self, jarvis_home: Path
    ) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        (jarvis_home / "config.toml").write_text("[engine]\nmax_retries = 0\n", encoding="utf-8")
        url = f"http://alice:s3cr3t-pw@127.0.0.1:{port}/v1"
        for verbose in ([], ["--verbose"]):
            result = run(Container(), "ask", *verbose, "--base-url", url, "q")
            assert result.exit_code == EXIT_ENGINE_UNAVAILABLE, result.output
            assert "s3cr3t" not in result.output
            assert "alice" not in result.output
            assert f"http://***@127.0.0.1:{port}/v1" in result.stderr

    @pytest.mark.parametrize("command", [["ask"], ["models"]])
    @pytest.mark.parametrize(
        "url",
        [
            "http://127.0.0.1:99999/v1",
            "http://u:s3cr3t@[::1/v1",
            "http://127.0.0.1:1/\udcff",
            "http://u:s3cr3t/pw@127.0.0.1:1/v1",  # the / cuts the password: port "s3cr3t"
        ],
    )
    def test_a_url_the_client_cannot_use_is_a_usage_error(
        self, command: list[str], url: str
    ) -> None:
        args = [*command, "--base-url", url] + (["q"] if command == ["ask"] else [])
        result = run(Container(), *args)
        assert_usage_error(result, "--base-url", "is not a usable URL")
        assert "s3cr3t" not in result.output

    @pytest.mark.parametrize(
        ("text", "shown"),
        [
            ("at http://u:pw@h:1/v1 (x)", "at http://***@h:1/v1 (x)"),
            ("https://token@example.org", "https://***@example.org"),
            ("http://a:p@ss@h/x", "http://***@h/x"),
            ("(engine at http://u:pw@h)", "(engine at http://***@h)"),
            ("https://u:pw@[::1]:8/v1", "https://***@[::1]:8/v1"),
            ("mail me@example.org, see http://h/x@y", "mail me@example.org, see http://h/x@y"),
            ("at postgresql://u:S3cret/Pw@h:1/db.", "at postgresql://***@h:1/db."),
            ("http://u:p?w#x@h/y", "http://***@h/y"),
            ("http://u:a/b@c@h/y", "http://***@h/y"),
            ("http://h:8080/x?a=b@c", "http://h:8080/x?a=***"),  # a parameter's @: a value
            ("http://h:80/x/@y", "http://***@y"),  # masks more than needed, never less
            ("see http://h:80/x and me@x.org", "see http://h:80/x and me@x.org"),
            ("http://[::1]:8/x@y", "http://[::1]:8/x@y"),
            ("no url at all", "no url at all"),
        ],
    )
    def test_userinfo_is_masked_in_any_text(self, text: str, shown: str) -> None:
        assert redact_urls(text) == shown

    @pytest.mark.parametrize(
        ("text", "shown"),
        [
            ("at http://h/v1?api_key=abc&page=2 (x)", "at http://h/v1?api_key=***&page=*** (x)"),
            ("(see http://h/x?token=abc).", "(see http://h/x?token=***)."),
            ("'http://u:pw@h/x?sig=abc#part'", "'http://***@h/x?sig=***#part'"),
            ("http://h/x?eyJhbGciOi", "http://h/x?***"),
            ("http://h/x?next=http://u:pw@i/?k=v&z=", "http://h/x?next=***&z="),
            ("Is the engine at http://h/v1?", "Is the engine at http://h/v1?"),
            ("a question? no url", "a question? no url"),
        ],
    )
    def test_query_values_are_masked_in_any_text(self, text: str, shown: str) -> None:
        assert redact_urls(text) == shown

    @pytest.mark.parametrize(
        ("url", "shown"),
        [
            ("http://172.16.3.1:9583/private_abc123", "http://172.16.3.1:9583/***"),
            ("http://u:pw@127.0.0.1:8931/mcp?token=t", "http://***@127.0.0.1:8931/mcp?token=***"),
            ("https://h/api/v1/mcp/", "https://h/api/v1/mcp/"),
            ("https://h/hooks/ZXhhbXBsZXRva2VuZXhhbXBsZQ/sse", "https://h/hooks/***/sse"),
            ("https://h/2024/a1b2c3d4-e5f6", "https://h/2024/***"),
            ("http://h", "http://h"),
            ("not a url at all", "not a url at all"),
        ],
    )
    def test_a_configured_url_is_shown_without_a_token_in_its_path(
        self, url: str, shown: str
    ) -> None:
        assert mask_url(url) == shown

    @pytest.mark.parametrize(
        "text",
        [
            "a" * 400_000 + "://" + "b" * 400_000 + "@",
            "://@" * 200_000,
            ":/" * 400_000,
            "://?" * 200_000,
            "http://h/?" + "a=b&" * 200_000,
            "://a:b/" * 100_000,  # each authority cut, each looking past it for an @
            "://a:b/" + "c" * 800_000 + "@",
            ("://a:b/" + "c" * 1000) * 800 + "@",
        ],
    )
    def test_masking_takes_linear_time(self, text: str) -> None:
        started = time.process_time()
        redact_urls(text)
        redact_urls(text * 2)
        mask_url(text * 2)
        # 800 KB in well under a second; a quadratic scan would need hours
        assert time.process_time() - started < 5
