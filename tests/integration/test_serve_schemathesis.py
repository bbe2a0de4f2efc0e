"""schemathesis, run against the server's own OpenAPI document, finds no 5xx."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jarvis.testing import ScriptedInference
from tests.support.serve import serving

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _schemathesis() -> str:
    beside = Path(sys.executable).with_name("schemathesis")
    found = str(beside) if beside.exists() else shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed (it is in the dev extra)")
    return found


def test_no_generated_request_gets_a_server_error(tmp_path: Path) -> None:
    with serving(ScriptedInference(["ok"])) as served:
        result = subprocess.run(
            [
                _schemathesis(),
                "run",
                served.url + "/openapi.json",
                "--checks",
                "not_a_server_error",
                "--max-examples",
                "40",
                "--seed",
                "1",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "passed" in result.stdout
