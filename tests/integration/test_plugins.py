"""Plug-ins for real: a package built (as a wheel) and pip-installed by the test into a
directory of its own, with ``jarvis.agents`` / ``jarvis.tools`` entry points, and a local
module named in ``[plugins] modules``; used through the command line as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, StubServer

pytestmark = pytest.mark.integration

PACKAGE = "jarvis_demo_plugin"

MODULE = '''
"""A plug-in package: an OpenJarvis-style agent and a typed-function tool."""

import os
from pathlib import Path

from jarvis.agents._stubs import AgentResult, BaseAgent

marker = os.environ.get("JARVIS_DEMO_PLUGIN_MARKER")
if marker:
    Path(marker).write_text("imported")


class EchoAgent(BaseAgent):
    agent_id = "echo"

    def run(self, input, context=None, **kwargs):
        return AgentResult(content="echo: " + input, turns=1)


def shout(text: str = "hello") -> str:
    """Say the text loudly.

    Args:
        text: What to say.
    """
    return text.upper()
'''

ENTRY_POINTS = f"""[jarvis.agents]
echo = {PACKAGE}:EchoAgent
broken = {PACKAGE}.broken:Agent

[jarvis.tools]
shout = {PACKAGE}:shout
"""


def build_wheel(directory: Path) -> Path:
    """The plug-in package as a wheel (written by hand: no build backend needed)."""
    dist = f"{PACKAGE}-1.0.dist-info"
    files = {
        f"{PACKAGE}/__init__.py": MODULE,
        f"{PACKAGE}/broken.py": "import jarvis_no_such_module_xyz\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": ENTRY_POINTS,
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist}/RECORD,,\n"
    wheel = directory / f"{PACKAGE}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{dist}/RECORD", record)
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plug-in, pip-installed into a target directory of its own."""
    build = tmp_path_factory.mktemp("plugin-build")
    target = tmp_path_factory.mktemp("plugin-site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(build_wheel(build)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (target / f"{PACKAGE}-1.0.dist-info" / "entry_points.txt").exists()
    return target


def jarvis(
    home: Path, site: Path, *args: str, marker: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJARVIS")}
    env["OPENJARVIS_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    if marker is not None:
        env["JARVIS_DEMO_PLUGIN_MARKER"] = str(marker)
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def configure(home: Path, stub: StubServer, extra: str = "") -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "stub-model"\n'
        f'[engine.openai]\nbase_url = "{stub.url}"\n{extra}',
        encoding="utf-8",
    )


def test_installed_plugins_are_listed_and_a_broken_one_is_a_notice(
    jarvis_home: Path, installed: Path, stub_server: StubServer
) -> None:
    configure(jarvis_home, stub_server)
    listed = jarvis(jarvis_home, installed, "agents", "--json")
    assert listed.returncode == 0, listed.stderr
    keys = [row["key"] for row in json.loads(listed.stdout)]
    assert "echo" in keys
    assert "simple" in keys
    assert "broken" not in keys
    assert "'broken'" in listed.stderr
    assert "jarvis_no_such_module_xyz" in listed.stderr
    assert "Traceback" not in listed.stderr
    tools = jarvis(jarvis_home, installed, "tools", "--json")
    assert tools.returncode == 0, tools.stderr
    assert "shout" in [row["name"] for row in json.loads(tools.stdout)]


def test_plugin_agent_and_tool_answer_through_ask(
    jarvis_home: Path, installed: Path, stub_server: StubServer, tmp_path: Path
) -> None:
    configure(jarvis_home, stub_server)
    marker = tmp_path / "imported"
    echoed = jarvis(jarvis_home, installed, "ask", "-a", "echo", "hi there", marker=marker)
    assert echoed.returncode == 0, echoed.stderr
    assert echoed.stdout.strip() == "echo: hi there"
    assert marker.exists()
    used = jarvis(
        jarvis_home, installed, "ask", "-a", "orchestrator", "--tools", "shout", "--json", "go"
    )
    assert used.returncode == 0, used.stderr
    answer = json.loads(used.stdout)
    assert answer["content"] == ANSWER
    assert [(t["tool_name"], t["content"]) for t in answer["tool_results"]] == [("shout", "HELLO")]


def test_no_plugin_is_loaded_when_none_is_asked_for(
    jarvis_home: Path, installed: Path, stub_server: StubServer, tmp_path: Path
) -> None:
    """A question to built-in agents and tools imports neither the plug-in nor jarvis's
    plug-in loader (``-X importtime`` lists every module a process imports)."""
    configure(jarvis_home, stub_server)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJARVIS")}
    env["OPENJARVIS_HOME"] = str(jarvis_home)
    env["PYTHONPATH"] = os.pathsep.join([str(installed), env.get("PYTHONPATH", "")])
    imports = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "jarvis",
            "ask",
            "-a",
            "orchestrator",
            "--tools",
            "calculator",
            "q",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert imports.returncode == 0, imports.stderr
    assert "jarvis.entrypoints.plugins" not in imports.stderr
    assert PACKAGE not in imports.stderr
    marker = tmp_path / "imported"
    plain = jarvis(
        jarvis_home,
        installed,
        "ask",
        "-a",
        "orchestrator",
        "--tools",
        "calculator",
        "q",
        marker=marker,
    )
    assert plain.returncode == 0, plain.stderr
    assert not marker.exists()


def test_a_broken_plugin_asked_for_is_exit_2_naming_it(
    jarvis_home: Path, installed: Path, stub_server: StubServer
) -> None:
    configure(jarvis_home, stub_server)
    broken = jarvis(jarvis_home, installed, "ask", "-a", "broken", "hi")
    assert broken.returncode == 2
    assert "Plug-in 'broken'" in broken.stderr
    assert "jarvis_no_such_module_xyz" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_plugin_modules_of_the_config(
    jarvis_home: Path, installed: Path, stub_server: StubServer, tmp_path: Path
) -> None:
    local = tmp_path / "local"
    local.mkdir()
    (local / "my_local_agents.py").write_text(
        textwrap.dedent(
            """
            from jarvis.agents._stubs import AgentResult, BaseAgent

            class Reverse(BaseAgent):
                agent_id = "reverse"

                def run(self, input, context=None, **kwargs):
                    return AgentResult(content=input[::-1], turns=1)

            AGENTS = {"reverse": Reverse}
            """
        ),
        encoding="utf-8",
    )
    configure(jarvis_home, stub_server, '[plugins]\nmodules = ["my_local_agents"]\n')
    site = Path(f"{local}{os.pathsep}{installed}")
    done = jarvis(jarvis_home, site, "ask", "-a", "reverse", "abc")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cba"
    configure(jarvis_home, stub_server, '[plugins]\nmodules = ["no_such_plugin_mod"]\n')
    failed = jarvis(jarvis_home, site, "ask", "-a", "nobody", "abc")
    assert failed.returncode == 2
    assert "module 'no_such_plugin_mod' ([plugins] modules)" in failed.stderr
    listed = jarvis(jarvis_home, site, "agents")
    assert listed.returncode == 0
    assert "no_such_plugin_mod" in listed.stderr
