"""Rewrite ``contracts/schemas/claude_code_runner/*.json`` from the runner protocol's models.

Run after changing ``src/jarvis/adapters/claude_agent_sdk/wire.py``:
``.venv/bin/python scripts/export_runner_schemas.py``. A unit test fails while the
committed schemas differ from the models; ``claude_code_runner/runner.mjs`` is written
against the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

from jarvis.adapters.claude_agent_sdk.wire import schemas

TARGET = Path(__file__).resolve().parent.parent / "contracts" / "schemas" / "claude_code_runner"


def render(schema: object) -> str:
    """The committed form of one schema: sorted keys, two-space indent, final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (TARGET / name).write_text(render(schema), encoding="utf-8")
        print(f"wrote {TARGET / name}")


if __name__ == "__main__":
    main()
