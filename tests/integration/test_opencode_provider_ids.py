"""opencode's provider and model ids (``-O provider_id=``, ``-O model_id=``) and its
pass-through mode (no engine URL, a ``provider/model`` model: no provider written by jarvis,
opencode resolves the model from its own configuration), on the pinned ``opencode serve``
and the scripted engine."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from contracts.external_runtime_contract import collect, done
from jarvis.adapters.opencode_server import OpenCodeRuntime
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.external_runtime import ExternalRunRequest
from tests.support.opencode import opencode_runtime, require_opencode
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

pytestmark = pytest.mark.integration

ANSWER = "Done."


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply(ANSWER)]) as scripted:
        yield scripted


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[OpenCodeRuntime]:
    async with opencode_runtime(tmp_path) as opened:
        yield opened


async def test_provider_and_model_ids_name_the_engine_in_opencode(
    runtime: OpenCodeRuntime, engine: ScriptedEngine, tmp_path: Path
) -> None:
    request = ExternalRunRequest(
        prompt="hi",
        workspace=str(tmp_path),
        model=MODEL,
        base_url=engine.url,
        timeout=120,
        provider_id="openjarvis",
        model_id="served-as",
    )
    result = done(await collect(runtime, request))
    assert result.content == ANSWER
    assert result.metadata["provider_id"] == "openjarvis"
    assert engine.requests[-1]["model"] == "served-as"
    assert runtime.server is not None
    config = json.loads(await asyncio.to_thread(Path(runtime.server.config_path).read_text))
    assert list(config["provider"]) == ["openjarvis"]
    assert config["model"] == "openjarvis/served-as"


async def test_pass_through_writes_no_provider_and_uses_opencodes_own(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user_config = tmp_path / "user-config"
    (user_config / "opencode").mkdir(parents=True)
    (user_config / "opencode" / "opencode.json").write_text(
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "provider": {
                    "mine": {
                        "npm": "@ai-sdk/openai-compatible",
                        "options": {"baseURL": engine.url, "apiKey": "x"},
                        "models": {MODEL: {"name": MODEL}},
                    }
                },
            }
        )
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user_config))
    request = ExternalRunRequest(
        prompt="hi", workspace=str(tmp_path), model=f"mine/{MODEL}", base_url="", timeout=120
    )
    result = done(await collect(runtime, request))
    assert result.content == ANSWER
    assert result.metadata["provider_id"] == "mine"
    assert engine.requests[-1]["model"] == MODEL
    assert runtime.server is not None
    assert "provider" not in json.loads(
        await asyncio.to_thread(Path(runtime.server.config_path).read_text)
    )


async def test_no_url_and_no_provider_in_the_model_is_refused_before_any_start(
    tmp_path: Path,
) -> None:
    runtime = OpenCodeRuntime(data_dir=tmp_path, binary=str(tmp_path / "never-started"))
    request = ExternalRunRequest(prompt="x", workspace=str(tmp_path), model="m", base_url="")
    with pytest.raises(ConfigurationError, match="provider/model"):
        await collect(runtime, request)
    assert runtime.server is None


def test_cli_takes_provider_id_and_model_id(engine: ScriptedEngine, tmp_path: Path) -> None:
    binary = require_opencode()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJARVIS", "JARVIS_"))}
    env.update(OPENJARVIS_HOME=str(tmp_path / "home"), TMPDIR=str(tmp))
    env["JARVIS_OPENCODE_BIN"] = binary
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jarvis",
            "ask",
            "-a",
            "opencode",
            "--engine",
            "openai",
            "--base-url",
            engine.url,
            "--model",
            MODEL,
            "-O",
            f"workspace={tmp_path}",
            "-O",
            "provider_id=openjarvis",
            "-O",
            "model_id=served-as",
            "--json",
            "hi",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["content"] == ANSWER
    assert answer["metadata"]["provider_id"] == "openjarvis"
    assert engine.requests[-1]["model"] == "served-as"
