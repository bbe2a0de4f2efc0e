"""Missing PostgreSQL binaries skip the PostgreSQL tests locally and fail them in CI."""

from __future__ import annotations

import pytest

from tests.support import postgres_server


def test_missing_binaries_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_server, "pg_binary", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must install them"):
        postgres_server.require_binaries()


def test_missing_binaries_skip_with_a_reason_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_server, "pg_binary", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="initdb, pg_ctl"):
        postgres_server.require_binaries()


def test_debian_binaries_off_path_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    found = postgres_server.pg_binary("initdb")
    if found is None:
        pytest.skip("no PostgreSQL under /usr/lib/postgresql on this machine")
    assert found.startswith("/usr/lib/postgresql/")
