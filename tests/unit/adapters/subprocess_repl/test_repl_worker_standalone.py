"""The REPL worker runs in the sandbox with ``-I -S``: it may import the standard library
only, never jarvis nor a third-party package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from jarvis.adapters.subprocess_repl.factory import WORKER_SCRIPT


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_the_worker_imports_the_standard_library_only() -> None:
    modules = imported_modules(WORKER_SCRIPT)
    assert "jarvis" not in modules
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(
        sys.stdlib_module_names
    )


def test_the_worker_is_a_script_of_its_own() -> None:
    text = WORKER_SCRIPT.read_text(encoding="utf-8")
    assert 'if __name__ == "__main__":' in text
    assert WORKER_SCRIPT.name == "worker.py"
