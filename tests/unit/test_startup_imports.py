"""Start-up stays small: what importing the package and the CLI loads (not timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("httpx", "pydantic", "dependency_injector", "rich", "llama_cpp", "docker", "asyncio")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(__import__('json').dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)} | set(json.loads(out))


def test_import_jarvis_loads_nothing_heavy() -> None:
    loaded = loaded_after("import jarvis")
    assert not loaded & set(HEAVY)
    assert not {m for m in loaded if m.startswith("jarvis.")}


def test_every_public_name_of_the_package_is_loaded_from_its_module() -> None:
    import importlib

    import jarvis

    assert set(jarvis._MODULE_OF) == set(jarvis.__all__)
    for name, module in jarvis._MODULE_OF.items():
        assert getattr(jarvis, name) is getattr(importlib.import_module(module), name)


def test_cli_module_imports_only_typer() -> None:
    loaded = loaded_after("import jarvis.entrypoints.cli")
    assert "typer" in loaded
    assert not loaded & set(HEAVY)
    assert "jarvis.entrypoints.composition.container" not in loaded


def test_help_builds_no_runtime() -> None:
    loaded = loaded_after(
        "import contextlib, io\n"
        "from jarvis.entrypoints.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    app(['ask', '--help'])"
    )
    assert not loaded & set(HEAVY)


def test_the_container_skips_unused_integrations() -> None:
    loaded = loaded_after("import jarvis.entrypoints.composition.container")
    assert "dependency_injector" in loaded
    hidden = {"yaml", "pydantic", "pydantic_settings", "fastapi", "starlette", "flask", "httpx"}
    assert not loaded & hidden


def test_hidden_modules_import_normally_afterwards() -> None:
    loaded = loaded_after(
        "import jarvis.entrypoints.composition.container\n"
        "import pydantic\n"
        "assert pydantic.BaseModel and pydantic.VERSION.startswith('2.')"
    )
    assert "pydantic" in loaded


def test_httpx_is_imported_without_its_command_line_client() -> None:
    loaded = loaded_after(
        "from jarvis.entrypoints.composition.skip_optional_imports import import_httpx\n"
        "import_httpx()\n"
        "import httpx\nassert httpx.AsyncClient"
    )
    assert "httpx" in loaded
    assert not loaded & {"httpx._main", "click", "rich"}


def test_a_failing_lean_import_falls_back_to_the_ordinary_one() -> None:
    loaded = loaded_after(
        "import contextlib\n"
        "import jarvis.entrypoints.composition.skip_optional_imports as lean\n"
        "@contextlib.contextmanager\n"
        "def broken(*names, stand_ins=None):\n"
        "    import dependency_injector.errors\n"
        "    raise AttributeError('a release that probes differently')\n"
        "    yield\n"
        "lean.skipping = broken\n"
        "lean.import_dependency_injector()\n"
        "from dependency_injector import containers, providers\n"
        "assert containers.DeclarativeContainer and providers.Selector"
    )
    assert "dependency_injector.containers" in loaded


def test_traces_without_a_collector_import_no_http_client() -> None:
    """Where traces go is asked by every run with traces on: without a collector, that
    imports neither the exporter nor httpx (``jarvis ask`` on the httptools wire imports
    httpx through :func:`import_httpx` alone, without its command-line client)."""
    loaded = loaded_after(
        "import os\n"
        "for key in [k for k in os.environ if k.startswith('OTEL_')]:\n"
        "    del os.environ[key]\n"
        "from jarvis.application.config import JarvisConfig, TraceSettings\n"
        "from jarvis.entrypoints.composition.traces import trace_writer\n"
        "config = JarvisConfig(traces=TraceSettings(enabled=True))\n"
        "assert trace_writer(config) is not None"
    )
    assert "jarvis.entrypoints.composition.traces" in loaded
    assert not loaded & {"httpx", "jarvis.adapters.otlp_http.exporter"}


def test_the_agent_loop_loads_no_trace_code_until_a_run_is_recorded() -> None:
    """Every process that runs an agent imports the loop; the run recording it calls is
    small, and what records are made of (spans, the random ids) is imported by those that
    record."""
    loaded = loaded_after("import jarvis.domain.loop.tool_loop")
    assert "jarvis.domain.run.steps" in loaded
    assert not loaded & {"jarvis.domain.traces", "jarvis.domain.trace_steps", "random"}


def test_keeping_a_session_loads_no_other_store(tmp_path: Path) -> None:
    """``jarvis ask`` keeps its question as a session: the SQLite session store is opened
    without the operator, managed-agent and approval stores it shares a database with."""
    loaded = loaded_after(
        "import os\n"
        f"os.environ['OPENJARVIS_HOME'] = {str(tmp_path)!r}\n"
        "from jarvis.application.config import JarvisConfig\n"
        "from jarvis.entrypoints.composition.stores import session_store\n"
        "for store in session_store(JarvisConfig()):\n"
        "    type(store).__name__"
    )
    assert "jarvis.adapters.sql_store.sessions" in loaded
    others = {"operators", "managed_agents", "approvals", "backend"}
    assert not loaded & {f"jarvis.adapters.sql_store.{name}" for name in others}
    assert not loaded & {"jarvis.domain.operators", "jarvis.domain.managed_agents"}
