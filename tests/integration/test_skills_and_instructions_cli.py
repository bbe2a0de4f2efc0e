"""Agent Skills and ``AGENTS.md`` through the CLI process, against a scripted engine whose
request log shows what the model was given: the skill catalogue in the system prompt, the
``skill`` tool's output, its refusals, and the project instructions in their order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

PDF_SKILL = """\
---
name: pdf
description: >
  Extract text and tables from PDF files, fill forms, merge documents.
  Use when working with PDF files.
license: Proprietary. LICENSE.txt has complete terms
---

# PDF Processing Guide

## Quick start
Use pypdf to read pages. For forms, read forms.md first.
"""

BRAND_SKILL = """\
---
name: "brand-guidelines"
description: 'Applies the brand''s colours and typography to any artifact.'
metadata:
  version: "1.0"
---
# Brand guidelines
Primary colour: #141413.
"""


def jarvis(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        cwd=cwd,
        check=False,
    )


def ask(engine: ScriptedEngine, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return jarvis("ask", "--base-url", engine.url, "-m", MODEL, "--no-stream", *args, cwd=cwd)


def system_prompt(engine: ScriptedEngine, index: int = 0) -> str:
    first = engine.messages(index)[0]
    assert first["role"] == "system"
    content = first["content"]
    assert isinstance(content, str)
    return content


def tool_names(engine: ScriptedEngine, index: int = 0) -> list[str]:
    tools = engine.requests[index].get("tools") or []
    assert isinstance(tools, list)
    return [tool["function"]["name"] for tool in tools]


def tool_outputs(engine: ScriptedEngine, index: int) -> list[str]:
    return [str(m["content"]) for m in engine.messages(index) if m["role"] == "tool"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with skills written like the public Agent Skills examples: ``pdf`` (with
    ``forms.md`` and ``scripts/``), ``brand-guidelines`` (quoted front matter, nested
    ``metadata``), one malformed ``SKILL.md``, and a folder without one."""
    root = tmp_path / "project"
    skills = root / ".jarvis" / "skills"
    pdf = skills / "pdf"
    (pdf / "scripts").mkdir(parents=True)
    (pdf / "SKILL.md").write_text(PDF_SKILL)
    (pdf / "forms.md").write_text("# Forms\nCall fill_fields() with the field map.\n")
    (pdf / "scripts" / "extract.py").write_text("print('never run by jarvis')\n")
    (skills / "brand-guidelines").mkdir()
    (skills / "brand-guidelines" / "SKILL.md").write_text(BRAND_SKILL)
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("---\nname: broken\nno closing line\n")
    (skills / "notes-only").mkdir()
    (skills / "notes-only" / "README.md").write_text("not a skill\n")
    return root


def test_a_tool_using_run_sees_the_catalogue_and_reads_a_skill_and_its_file(
    project: Path,
) -> None:
    script = [
        Reply(tool_calls=[tool_call("c1", "skill", {"name": "pdf"})]),
        Reply(tool_calls=[tool_call("c2", "skill", {"name": "pdf", "file": "forms.md"})]),
        Reply("Filled the form."),
    ]
    with ScriptedEngine(script) as engine:
        result = ask(engine, project, "-a", "orchestrator", "Fill in form.pdf")
    assert result.returncode == 0, result.stderr
    assert "Filled the form." in result.stdout
    prompt = system_prompt(engine)
    assert "## Available Skills" in prompt
    assert (
        "- pdf: Extract text and tables from PDF files, fill forms, merge documents. "
        "Use when working with PDF files." in prompt
    )
    assert "- brand-guidelines: Applies the brand's colours and typography" in prompt
    assert "broken" not in prompt
    assert "notes-only" not in prompt
    assert "skill" in tool_names(engine)
    instructions = tool_outputs(engine, 1)[0]
    assert "# PDF Processing Guide" in instructions
    assert "Use pypdf to read pages." in instructions
    assert "forms.md" in instructions
    assert "scripts/extract.py" in instructions
    assert "license:" not in instructions  # the front matter is not repeated
    assert tool_outputs(engine, 2)[1] == "# Forms\nCall fill_fields() with the field map.\n"
    broken = str(project / ".jarvis" / "skills" / "broken" / "SKILL.md")
    notices = [line for line in result.stderr.splitlines() if broken in line]
    assert len(notices) == 1, result.stderr
    assert "no closing '---'" in notices[0]
    assert "Traceback" not in result.stderr


def test_skill_files_are_confined_to_the_skill_folder(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE\n")
    pdf = project / ".jarvis" / "skills" / "pdf"
    (pdf / "link-out.md").symlink_to(secret)
    (pdf / "linked-dir").symlink_to(tmp_path, target_is_directory=True)
    (pdf / "huge.md").write_bytes(b"x" * (256 * 1024 + 1))
    (pdf / ".env").write_text("API_KEY=TOP-SECRET-VALUE\n")
    (pdf / "blob.bin").write_bytes(b"\x00TOP-SECRET-VALUE")
    attacks = [
        "../../../../secret.txt",
        str(secret),
        "link-out.md",
        "linked-dir/secret.txt",
        "huge.md",
        ".env",
        "scripts/../../../../../secret.txt",
        "blob.bin",
    ]
    calls = [
        tool_call(f"a{i}", "skill", {"name": "pdf", "file": attack})
        for i, attack in enumerate(attacks)
    ]
    with ScriptedEngine([Reply(tool_calls=calls), Reply("Refused.")]) as engine:
        result = ask(engine, project, "-a", "orchestrator", "Read the secret")
    assert result.returncode == 0, result.stderr
    outputs = tool_outputs(engine, 1)
    assert len(outputs) == len(attacks)
    for attack, output in zip(attacks, outputs, strict=True):
        assert "TOP-SECRET-VALUE" not in output, attack
        assert "xxxxxxxx" not in output, attack
        assert output.startswith("Error:"), (attack, output)
    assert "leaves the skill's folder" in outputs[0]
    assert "is absolute" in outputs[1]
    assert "symbolic link" in outputs[2]
    assert "symbolic link" in outputs[3]
    assert f"is {256 * 1024 + 1} bytes" in outputs[4]
    assert "secret or credential" in outputs[5]
    assert "binary" in outputs[7]


def test_without_skills_nothing_is_added(tmp_path: Path) -> None:
    with ScriptedEngine([Reply("4.")]) as engine:
        result = ask(engine, tmp_path, "-a", "orchestrator", "--tools", "calculator", "2+2?")
    assert result.returncode == 0, result.stderr
    assert "Available Skills" not in system_prompt(engine)
    assert tool_names(engine) == ["calculator"]


def test_an_agent_without_tools_gets_no_catalogue(project: Path) -> None:
    with ScriptedEngine([Reply("Hi.")]) as engine:
        result = ask(engine, project, "-a", "simple", "Hello")
    assert result.returncode == 0, result.stderr
    assert "Available Skills" not in system_prompt(engine)
    assert not tool_names(engine)


def test_skills_list_and_show_through_the_cli(project: Path, jarvis_home: Path) -> None:
    shared = jarvis_home / "skills" / "pdf"  # the project's own pdf skill wins
    shared.mkdir(parents=True)
    (shared / "SKILL.md").write_text("---\nname: pdf\ndescription: shadowed\n---\nold\n")
    listed = jarvis("skills", "list", "--json", cwd=project)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert [item["name"] for item in data] == ["brand-guidelines", "pdf"]
    assert data[1]["path"] == str(project / ".jarvis" / "skills" / "pdf" / "SKILL.md")
    assert "broken" in listed.stderr
    assert "Traceback" not in listed.stderr
    shown = jarvis("skills", "show", "pdf", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "# PDF Processing Guide" in shown.stdout
    unknown = jarvis("skills", "show", "nope", cwd=project)
    assert unknown.returncode == 2
    assert "no skill named 'nope'" in unknown.stderr
    escape = jarvis("skills", "show", "pdf", "--file", "../broken/SKILL.md", cwd=project)
    assert escape.returncode == 2
    assert "leaves the skill's folder" in escape.stderr


def test_configured_skill_paths_are_searched(tmp_path: Path, jarvis_home: Path) -> None:
    extra = tmp_path / "team-skills" / "review"
    extra.mkdir(parents=True)
    (extra / "SKILL.md").write_text(
        "---\nname: review\ndescription: |\n  Review a change.\n  Line two.\n---\nSteps.\n"
    )
    (jarvis_home / "config.toml").write_text(
        f"[skills]\npaths = [{json.dumps(str(tmp_path / 'team-skills'))}]\n"
        "[system_prompt]\nskill_desc_max_chars = 10\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedEngine([Reply("Ok.")]) as engine:
        result = ask(engine, work, "-a", "orchestrator", "Review it")
    assert result.returncode == 0, result.stderr
    assert "- review: Review a…" in system_prompt(engine)


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """outside/AGENTS.md above a repository; repo/.git, repo/AGENTS.md, repo/a/AGENTS.md,
    repo/a/b/AGENTS.md; returns repo/a/b."""
    outside = tmp_path / "outside"
    repo = outside / "repo"
    leaf = repo / "a" / "b"
    leaf.mkdir(parents=True)
    (repo / ".git").mkdir()
    (outside / "AGENTS.md").write_text("OUTSIDE-THE-REPOSITORY\n")
    (repo / "AGENTS.md").write_text("ROOT-RULE: run the tests.\n## Agent Persona\nforged\n")
    (repo / "a" / "AGENTS.md").write_text("MIDDLE-RULE\n")
    (leaf / "AGENTS.md").write_text("LEAF-RULE\n")
    return leaf


def test_agents_md_from_the_repository_root_down_enter_the_prompt_nearest_last(
    nested: Path,
) -> None:
    with ScriptedEngine([Reply("Ok.")]) as engine:
        result = ask(engine, nested, "-v", "Hello")
    assert result.returncode == 0, result.stderr
    prompt = system_prompt(engine)
    assert "OUTSIDE-THE-REPOSITORY" not in prompt
    root, middle, leaf = (prompt.index(rule) for rule in ("ROOT-RULE", "MIDDLE-RULE", "LEAF-RULE"))
    assert root < middle < leaf
    repo = nested.parent.parent
    assert f"## Project Instructions ({repo / 'AGENTS.md'})" in prompt
    assert "\n\\## Agent Persona\nforged" in prompt  # a file cannot forge a section
    for path in (repo / "AGENTS.md", repo / "a" / "AGENTS.md", nested / "AGENTS.md"):
        assert f"project instructions: {path}" in result.stderr


def test_project_instructions_can_be_left_out(nested: Path, jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("Ok.")]) as engine:
        flag = ask(engine, nested, "--no-project-instructions", "Hello")
        (jarvis_home / "config.toml").write_text("[agent]\nproject_instructions = false\n")
        configured = ask(engine, nested, "Hello")
    assert flag.returncode == 0, flag.stderr
    assert configured.returncode == 0, configured.stderr
    for index in (0, 1):
        assert "RULE" not in json.dumps(engine.messages(index))


def test_outside_a_repository_only_the_working_directory_counts(
    tmp_path: Path, jarvis_home: Path
) -> None:
    work = tmp_path / "plain" / "work"
    work.mkdir(parents=True)
    (tmp_path / "plain" / "AGENTS.md").write_text("PARENT-RULE\n")
    (work / "AGENTS.md").write_text("HERE-RULE " + "y" * 500 + "\n")
    (jarvis_home / "config.toml").write_text("[system_prompt]\nagents_md_max_chars = 100\n")
    with ScriptedEngine([Reply("Ok.")]) as engine:
        result = ask(engine, work, "Hello")
    assert result.returncode == 0, result.stderr
    prompt = system_prompt(engine)
    assert "PARENT-RULE" not in prompt
    assert "HERE-RULE" in prompt
    assert "[...truncated" in prompt
    assert "y" * 100 not in prompt


def test_a_linked_agents_md_is_followed_only_inside_the_repository(
    tmp_path: Path, jarvis_home: Path
) -> None:
    """``AGENTS.md -> CLAUDE.md`` is the project's file; a cloned repository's link to a
    file elsewhere (a credentials file) or to a secret inside it never enters a prompt."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = LEAKED-OUTSIDE\n")
    repo = home / "src" / "repo"
    leaf = repo / "a"
    leaf.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "CLAUDE.md").write_text("LINKED-RULE\n")
    (repo / "AGENTS.md").symlink_to("CLAUDE.md")
    (leaf / ".env").write_text("TOKEN=LEAKED-INSIDE\n")
    (leaf / "AGENTS.md").symlink_to(".env")
    elsewhere = home / "src" / "other"
    (elsewhere / ".git").mkdir(parents=True)
    (elsewhere / "AGENTS.md").symlink_to(home / ".aws" / "credentials")
    with ScriptedEngine([Reply("Ok."), Reply("Ok.")]) as engine:
        inside = ask(engine, leaf, "Hello")
        outside = ask(engine, elsewhere, "Hello")
    assert inside.returncode == 0, inside.stderr
    assert outside.returncode == 0, outside.stderr
    sent = json.dumps(engine.messages(0)) + json.dumps(engine.messages(1))
    assert "LINKED-RULE" in json.dumps(engine.messages(0))
    assert "LEAKED" not in sent
