"""Rewrite ``contracts/schemas/sandbox/*.json`` from the sandbox protocol's pydantic models.

Run after changing ``src/jarvis/domain/sandbox_protocol.py``:
``.venv/bin/python scripts/export_sandbox_schemas.py``. A unit test fails while the
committed schemas differ from the models.
"""

from __future__ import annotations

from pathlib import Path

from jarvis.domain.sandbox_protocol import schemas
from scripts.export_repl_schemas import render

TARGET = Path(__file__).resolve().parent.parent / "contracts" / "schemas" / "sandbox"


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (TARGET / name).write_text(render(schema), encoding="utf-8")
        print(f"wrote {TARGET / name}")


if __name__ == "__main__":
    main()
