"""A temp dir of a test's own, for tests that look for what a runtime left in the temp dir
or which of its processes still run: another test running at the same time (in another
process) leaves its own there."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Give one test its own temp dir (``tempfile.tempdir`` and ``TMPDIR``), walkable by
    other users like ``/tmp``: the runners' private dirs and processes found there are this
    test's, not those of another test running at the same time in another process."""
    base = Path(tempfile.mkdtemp(prefix="jarvis-test-tmp-"))
    base.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    monkeypatch.setenv("TMPDIR", str(base))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
