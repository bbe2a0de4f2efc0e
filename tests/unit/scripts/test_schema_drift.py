"""Every committed JSON Schema under ``contracts/schemas/`` matches the models it was made
from, and no committed file is left over from a model that is gone."""

from __future__ import annotations

import pytest

from scripts.export_schemas import FAMILIES, SCHEMAS, render, schemas, target

CASES = [(family, name) for family in FAMILIES for name in sorted(schemas(family))]


@pytest.mark.parametrize(("family", "name"), CASES)
def test_the_committed_schema_matches_the_models(family: str, name: str) -> None:
    committed = target(family) / name
    assert committed.exists(), f"missing {committed}: run scripts/export_schemas.py {family}"
    assert committed.read_text(encoding="utf-8") == render(schemas(family)[name]), (
        f"{committed} drifted from {FAMILIES[family]}: run scripts/export_schemas.py {family}"
    )


def test_every_committed_schema_has_a_model() -> None:
    committed = {(p.parent.name, p.name) for p in SCHEMAS.glob("*/*.json")}
    assert committed == set(CASES)


def test_an_unknown_family_is_refused() -> None:
    from scripts.export_schemas import main

    with pytest.raises(SystemExit, match="known: repl"):
        main(["nope"])
