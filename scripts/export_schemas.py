"""Rewrite the JSON Schemas under ``contracts/schemas/`` from the models they describe.

Run after changing one of the protocol models: ``.venv/bin/python scripts/export_schemas.py``
(or name families: ``... export_schemas.py sse repl``). ``tests/unit/scripts/test_schema_drift.py``
fails while a committed schema differs from its model, so the other side of each protocol
(the REPL worker, the sandbox container, SSE clients, ``claude_code_runner/runner.mjs``) can
be written against the files.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parent.parent / "contracts" / "schemas"

FAMILIES: Mapping[str, str] = {
    "repl": "jarvis.adapters.subprocess_repl.protocol",
    "sandbox": "jarvis.domain.sandbox.protocol",
    "sse": "jarvis.entrypoints.http.events",
    "claude_code_runner": "jarvis.adapters.claude_agent_sdk.wire",
}
"""Each folder of ``contracts/schemas/`` and the module whose ``schemas()`` it is made of."""


def target(family: str) -> Path:
    """The folder of one family's committed schemas."""
    return SCHEMAS / family


def schemas(family: str) -> dict[str, object]:
    """A family's schemas by file name, straight from its models."""
    made: Mapping[str, object] = importlib.import_module(FAMILIES[family]).schemas()
    return dict(made)


def render(schema: object) -> str:
    """The committed form of one schema: sorted keys, two-space indent, final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] = ()) -> None:
    for family in argv or FAMILIES:
        if family not in FAMILIES:
            raise SystemExit(f"unknown family '{family}'; known: {', '.join(FAMILIES)}")
        folder = target(family)
        folder.mkdir(parents=True, exist_ok=True)
        for name, schema in schemas(family).items():
            (folder / name).write_text(render(schema), encoding="utf-8")
            print(f"wrote {folder / name}")


if __name__ == "__main__":
    main(sys.argv[1:])
