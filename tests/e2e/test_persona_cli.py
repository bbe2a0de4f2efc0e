"""Persona end to end: real files in the test's config dir, the real CLI and SDK, the engine
replaced by a scripted one whose recorded requests show the system prompt sent."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis import Jarvis
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.testing import ScriptedInference


def run(engine: ScriptedInference | None, *args: str, env: dict[str, str] | None = None) -> Result:
    container = Container()
    if engine is not None:
        container.inference.override(engine)
    return CliRunner().invoke(app, list(args), obj=container, env=env)


def system_prompt(engine: ScriptedInference, index: int = 0) -> str:
    first = engine.requests[index].messages[0]
    return first.content if first.role is Role.SYSTEM else ""


def snapshot(root: Path) -> dict[str, object]:
    """Every entry below ``root``: link targets, folders, file bytes (size, inode and
    modification time for files too large to read in a test)."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[key] = "dir"
        elif (info := path.stat()).st_size > 1024**2:
            found[key] = (info.st_size, info.st_ino, info.st_mtime_ns)
        else:
            found[key] = path.read_bytes()
    return found


@pytest.fixture
def home(jarvis_home: Path) -> Path:
    (jarvis_home / "SOUL.md").write_text("Be terse.\n", encoding="utf-8")
    (jarvis_home / "MEMORY.md").write_text("- likes tea\n", encoding="utf-8")
    work = jarvis_home / "personas" / "work"
    work.mkdir(parents=True)
    (work / "SOUL.md").write_text("Formal, for work.\n", encoding="utf-8")
    (jarvis_home / "personas" / "home").mkdir()
    return jarvis_home


class TestAskPersona:
    def test_the_default_files_follow_the_agents_own_prompt(self, home: Path) -> None:
        engine = ScriptedInference(["ok"])
        result = run(engine, "ask", "hello")
        assert result.exit_code == 0, result.output
        prompt = system_prompt(engine)
        assert prompt.startswith("You are a helpful AI assistant")
        assert prompt.endswith("## Agent Persona\n\nBe terse.\n\n## Agent Memory\n\n- likes tea")

    def test_a_named_persona_replaces_the_default_files(self, home: Path) -> None:
        engine = ScriptedInference(["ok"])
        assert run(engine, "ask", "--persona", "work", "hello").exit_code == 0
        prompt = system_prompt(engine)
        assert prompt.endswith("## Agent Persona\n\nFormal, for work.")
        assert "likes tea" not in prompt

    def test_persona_none_injects_nothing(self, home: Path) -> None:
        engine = ScriptedInference(["ok"])
        assert run(engine, "ask", "--persona", "none", "hello").exit_code == 0
        assert "##" not in system_prompt(engine)

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            ("wrok", "Unknown persona 'wrok'"),
            ("../etc", "Invalid persona name"),
            ("a\\b", "Invalid persona name"),
            ("..", "Invalid persona name"),
            ("", "Invalid persona name"),
        ],
    )
    def test_a_bad_persona_is_a_usage_error_listing_the_personas(
        self, home: Path, name: str, message: str
    ) -> None:
        engine = ScriptedInference(["ok"])
        before = snapshot(home)
        result = run(engine, "ask", "--persona", name, "hello")
        assert result.exit_code == EXIT_USAGE
        assert message in result.stderr
        assert "Existing personas: home, work" in result.stderr
        assert "Traceback" not in result.output
        assert engine.requests == []
        # the persona files are untouched; a kept ask opens the session store before the
        # engine is asked (as -c does), which may leave an empty sessions.db
        after = {k: v for k, v in snapshot(home).items() if not k.startswith("sessions.db")}
        assert after == before

    def test_the_configured_persona_name_is_the_default(self, home: Path) -> None:
        (home / "config.toml").write_text('[memory_files]\npersona_name = "work"\n')
        engine = ScriptedInference(["ok"])
        assert run(engine, "ask", "hello").exit_code == 0
        assert "Formal, for work." in system_prompt(engine)
        result = run(ScriptedInference(["ok"]), "ask", "--persona", "none", "hello")
        assert result.exit_code == 0

    def test_budgets_and_paths_come_from_the_config(self, home: Path, tmp_path: Path) -> None:
        (home / "notes").mkdir()
        (home / "notes" / "me.md").write_text("U" * 300)
        (home / "config.toml").write_text(
            '[memory_files]\nuser_path = "notes/me.md"\n[system_prompt]\nuser_max_chars = 100\n'
        )
        engine = ScriptedInference(["ok"])
        assert run(engine, "ask", "hello").exit_code == 0
        assert system_prompt(engine).endswith(
            "## User Profile\n\n" + "U" * 70 + "\n\n[...truncated 210 chars...]\n\n" + "U" * 20
        )

    def test_an_unknown_config_key_is_reported(self, home: Path) -> None:
        (home / "config.toml").write_text("[system_prompt]\nsoul_max_char = 10\n")
        result = run(ScriptedInference(["ok"]), "ask", "hello")
        assert result.exit_code == EXIT_USAGE
        assert "soul_max_char" in result.stderr

    def test_file_warnings_show_with_verbose_only(self, home: Path) -> None:
        (home / "USER.md").write_bytes(b"caf\xe9")
        quiet = run(ScriptedInference(["ok"]), "ask", "hello")
        assert quiet.exit_code == 0
        assert "UTF-8" not in quiet.stderr
        loud = run(ScriptedInference(["ok"]), "ask", "--verbose", "hello")
        assert loud.exit_code == 0
        assert "jarvis: warning:" in loud.stderr
        assert "USER.md is not valid UTF-8" in loud.stderr

    def test_bad_files_never_break_a_question_nor_change(self, home: Path, tmp_path: Path) -> None:
        secret = tmp_path / "id_rsa"
        secret.write_text("-----BEGIN PRIVATE KEY-----")
        (home / "SOUL.md").unlink()
        (home / "SOUL.md").symlink_to(secret)
        (home / "USER.md").write_bytes(b"\x00\x01\x02binary")
        ends = b"- filler entry\n" * 5000  # more than half the 64 KiB read limit
        with (home / "MEMORY.md").open("wb") as handle:
            handle.write(b"- oldest\n" + ends)
            handle.truncate(1024**3)  # 1 GiB; the sparse middle is never read
            handle.seek(1024**3 - len(ends) - 9)
            handle.write(ends + b"- newest\n")
        before = snapshot(home)
        engine = ScriptedInference(["ok"])
        # --no-keep: a kept ask adds sessions.db to this dir, by design; the persona files
        # are what must stay unchanged
        result = run(engine, "ask", "--no-keep", "--verbose", "hello")
        assert result.exit_code == 0, result.output
        prompt = system_prompt(engine)
        assert "PRIVATE KEY" not in prompt
        assert "binary" not in prompt
        assert "## Agent Memory\n\n- oldest" in prompt
        assert prompt.endswith("- newest")
        assert "unread bytes" in prompt
        assert len(prompt) < 3000
        for warning in ("outside", "NUL bytes", "read limit"):
            assert warning in result.stderr
        assert snapshot(home) == before


class TestPersonaShow:
    def test_shows_each_sections_budget_use_and_the_prompt(self, home: Path) -> None:
        result = run(None, "persona", "show")
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0] == "persona: default files"
        assert "SOUL" in lines[1]
        assert "9/4,000 chars" in lines[1]
        assert str(home / "SOUL.md") in lines[1]
        assert "11/2,500 chars" in lines[2]
        assert "-/1,500 chars" in lines[3]
        assert "missing or empty" in lines[3]
        assert result.stdout.endswith("## Agent Memory\n\n- likes tea\n")

    def test_json_reports_truncation(self, home: Path) -> None:
        (home / "SOUL.md").write_text("x" * 5000)
        result = run(None, "persona", "show", "--json", "--persona", "")
        assert result.exit_code == EXIT_USAGE
        result = run(None, "persona", "show", "--json")
        data = json.loads(result.stdout)
        soul = data["sections"][0]
        assert (soul["kind"], soul["used_chars"], soul["budget"]) == ("soul", 3600, 4000)
        assert (soul["truncated"], soul["cut_chars"]) == (True, 1400)
        assert "[...truncated 1400 chars...]" in data["prompt"]

    def test_a_named_persona_and_none(self, home: Path) -> None:
        work = run(None, "persona", "show", "--persona", "work")
        assert work.stdout.startswith("persona: 'work'")
        assert str(home / "personas" / "work" / "SOUL.md") in work.stdout
        none = run(None, "persona", "show", "--persona", "none")
        assert none.stdout == "persona: none (no persona sections are added)\n"

    def test_an_unknown_persona_exits_2(self, home: Path) -> None:
        result = run(None, "persona", "show", "--persona", "nope")
        assert result.exit_code == EXIT_USAGE
        assert "Unknown persona 'nope'" in result.stderr


def _editor_appending(line: str) -> str:
    script = f"import sys; open(sys.argv[1], 'a', encoding='utf-8').write({line!r})"
    return shlex.join([sys.executable, "-c", script])


class TestPersonaEdit:
    def test_opens_the_editor_on_the_default_file_creating_it(self, home: Path) -> None:
        result = run(None, "persona", "edit", "user", env={"EDITOR": _editor_appending("Ada\n")})
        assert result.exit_code == 0, result.output
        assert (home / "USER.md").read_text() == "Ada\n"
        assert "USER.md: 3/1,500 chars" in result.stderr

    def test_visual_is_the_fallback(self, home: Path) -> None:
        env = {"EDITOR": "", "VISUAL": _editor_appending("- more\n")}
        assert run(None, "persona", "edit", "memory", env=env).exit_code == 0
        assert (home / "MEMORY.md").read_text() == "- likes tea\n- more\n"

    def test_without_editor_variables_nano_or_vi_is_used(self, home: Path, tmp_path: Path) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        nano = bin_dir / "nano"
        nano.write_text('#!/bin/sh\nprintf "%s\\n" "- via nano" >> "$1"\n')
        nano.chmod(0o755)
        env = {"EDITOR": "", "VISUAL": "", "PATH": str(bin_dir)}
        result = run(None, "persona", "edit", "memory", env=env)
        assert result.exit_code == 0, result.output
        assert (home / "MEMORY.md").read_text() == "- likes tea\n- via nano\n"

    def test_never_edits_a_named_personas_copy(self, home: Path) -> None:
        (home / "config.toml").write_text('[memory_files]\npersona_name = "work"\n')
        env = {"EDITOR": _editor_appending("Warm.\n")}
        assert run(None, "persona", "edit", "soul", env=env).exit_code == 0
        assert (home / "SOUL.md").read_text() == "Be terse.\nWarm.\n"
        assert (home / "personas" / "work" / "SOUL.md").read_text() == "Formal, for work.\n"

    def test_a_missing_editor_exits_2_and_changes_nothing(self, home: Path) -> None:
        before = snapshot(home)
        result = run(None, "persona", "edit", "soul", env={"EDITOR": "no-such-editor-xyz"})
        assert result.exit_code == EXIT_USAGE
        assert "The editor 'no-such-editor-xyz' (from $EDITOR) was not found" in result.stderr
        empty_path = {"EDITOR": "", "VISUAL": "", "PATH": str(home / "no-bin")}
        result = run(None, "persona", "edit", "memory", env=empty_path)
        assert result.exit_code == EXIT_USAGE
        assert "No editor found" in result.stderr
        assert snapshot(home) == before

    def test_a_failing_editor_is_reported(self, home: Path) -> None:
        fail = shlex.join([sys.executable, "-c", "raise SystemExit(3)"])
        result = run(None, "persona", "edit", "soul", env={"EDITOR": fail})
        assert result.exit_code == 1
        assert "exited with status 3" in result.stderr

    def test_an_unwritable_config_dir_exits_2_and_changes_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        monkeypatch.setenv("OPENJARVIS_HOME", str(blocker / "openjarvis"))
        config = tmp_path / "config.toml"
        config.write_text("")
        before = snapshot(tmp_path)
        editor = {"EDITOR": _editor_appending("x")}
        result = run(None, "persona", "edit", "soul", "--config", str(config), env=editor)
        assert result.exit_code == EXIT_USAGE
        assert "Cannot write" in result.stderr
        assert "Traceback" not in result.output
        assert snapshot(tmp_path) == before


class TestNextConversation:
    def test_an_edit_applies_to_the_next_question_of_the_same_instance(self, home: Path) -> None:
        engine = ScriptedInference(["one", "two"])
        with Jarvis(inference=engine) as j:
            j.ask("first")
            (home / "MEMORY.md").write_text("- switched to coffee\n")
            j.ask("second")
            j.ask("third", persona="work")
        assert "- likes tea" in system_prompt(engine, 0)
        assert "- switched to coffee" in system_prompt(engine, 1)
        assert "Formal, for work." in system_prompt(engine, 2)
        assert "coffee" not in system_prompt(engine, 2)

    def test_edits_count_once_the_prompt_files_are_kept_between_questions(
        self, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From a process's second question on, the persona, ``AGENTS.md`` and skills are
        kept (watched) between questions: an edit of each still counts at the next one."""
        project = tmp_path / "project"
        (project / ".git").mkdir(parents=True)
        (project / "AGENTS.md").write_text("Use tabs.")
        monkeypatch.chdir(project)
        engine = ScriptedInference(["ok"] * 12)
        with Jarvis(inference=engine) as j:
            for _ in range(3):
                j.ask("q", agent="orchestrator")
            (home / "MEMORY.md").write_text("- switched to coffee\n")
            j.ask("q", agent="orchestrator")
            (project / "AGENTS.md").write_text("Use spaces.")
            j.ask("q", agent="orchestrator")
            skill = project / ".jarvis" / "skills" / "deploy"
            skill.mkdir(parents=True)
            (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ships it.\n---\n")
            j.ask("q", agent="orchestrator")
        assert "- likes tea" in system_prompt(engine, 2)
        assert "coffee" in system_prompt(engine, 3)
        assert "tea" not in system_prompt(engine, 3)
        assert "Use tabs." in system_prompt(engine, 3)
        assert "Use spaces." in system_prompt(engine, 4)
        assert "Ships it." not in system_prompt(engine, 4)
        assert "Ships it." in system_prompt(engine, 5)

    def test_the_sdk_reports_a_bad_persona(self, home: Path) -> None:
        from jarvis.domain.errors import PersonaError

        with (
            Jarvis(inference=ScriptedInference(["ok"])) as j,
            pytest.raises(PersonaError, match="Existing personas") as caught,
        ):
            j.ask("q", persona="../../etc")
        assert "home, work" in str(caught.value)


class TestPersonaToolsThroughTheSdk:
    def test_memory_manage_edits_the_default_file_for_the_next_question(self, home: Path) -> None:
        call = ToolCall(
            id="c1",
            name="memory_manage",
            arguments={"action": "add", "entry": "prefers metric units"},
        )
        engine = ScriptedInference(
            [
                Completion(content="", tool_calls=(call,), finish_reason="tool_calls"),
                "Noted.",
                "ok",
            ]
        )
        with Jarvis(inference=engine, approve="auto") as j:  # the tool itself is tested here
            answer = j.ask_full(
                "Remember that I prefer metric units.",
                agent="orchestrator",
                tools=["memory_manage"],
                persona="work",
            )
            assert answer.content == "Noted."
            assert answer.tool_results[0].success, answer.tool_results[0].content
            j.ask("What do you know about me?")
        assert (home / "MEMORY.md").read_text() == "- likes tea\n- prefers metric units\n"
        assert not (home / "personas" / "work" / "MEMORY.md").exists()
        assert "- prefers metric units" not in system_prompt(engine, 0)
        assert system_prompt(engine, 2).endswith("- likes tea\n- prefers metric units")

    def test_an_empty_remove_leaves_memory_as_it_was(self, home: Path) -> None:
        call = ToolCall(id="c1", name="memory_manage", arguments={"action": "remove"})
        engine = ScriptedInference(
            [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "Done."]
        )
        with Jarvis(inference=engine, approve="auto") as j:  # the tool itself is tested here
            answer = j.ask_full("Forget it", agent="orchestrator", tools=["memory_manage"])
        assert not answer.tool_results[0].success
        assert "'entry' is empty" in answer.tool_results[0].content
        assert (home / "MEMORY.md").read_text() == "- likes tea\n"
