"""Rules of the source tree that review alone would let drift, measured on the code itself:
by its syntax tree, except the error tree and the agents' constructors, which are read from
the classes of every module of jarvis, imported."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jarvis
from jarvis.domain import errors
from jarvis.domain.loop.base import BaseAgent

SRC = Path(jarvis.__file__).resolve().parent


def _modules(*parts: str) -> Iterator[tuple[str, ast.Module]]:
    """(path relative to the package, parsed module) of every module under ``parts``."""
    for path in sorted(SRC.joinpath(*parts).rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


@cache
def _import_everything() -> None:
    """Import every module of jarvis, so that every class it defines exists."""
    for module in pkgutil.walk_packages(jarvis.__path__, "jarvis."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _subclasses(cls: type[object]) -> set[type[object]]:
    found: set[type[object]] = set()
    subclasses: list[type[object]] = cls.__subclasses__()
    for sub in subclasses:
        found |= {sub, *_subclasses(sub)}
    return found


# --- the domain performs no I/O ------------------------------------------------------------

IO_MODULES = frozenset(
    {"os", "pathlib", "subprocess", "socket", "shutil", "tempfile", "glob", "io", "sys"}
    | {"signal", "select", "selectors", "ssl", "http", "urllib", "sqlite3", "mmap", "fcntl"}
)
"""Modules whose import means file, process, network or environment access."""

IO_CALLS = frozenset(
    {"open", "time.sleep", "asyncio.sleep", "asyncio.open_connection", "asyncio.start_server"}
    | {"asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "input", "print"}
)
"""Calls that read or write outside the process (or block it on the clock)."""


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _io_uses(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in IO_MODULES:
                    yield f"line {node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in IO_MODULES:
                yield f"line {node.lineno}: from {node.module} import ..."
            for alias in node.names:
                if f"{node.module}.{alias.name}" in IO_CALLS:
                    yield f"line {node.lineno}: from {node.module} import {alias.name}"
        elif isinstance(node, ast.Call) and _dotted(node.func) in IO_CALLS:
            yield f"line {node.lineno}: {_dotted(node.func)}(...)"


def test_the_domain_performs_no_io() -> None:
    found = [f"{path} {use}" for path, tree in _modules("domain") for use in _io_uses(tree)]
    assert found == [], "the domain reads files, processes, sockets or the environment"


def test_the_io_scan_finds_what_it_looks_for() -> None:
    sample = ast.parse(
        "import os.path\nfrom pathlib import Path\nfrom time import sleep\n"
        "open('x')\nasyncio.create_subprocess_exec('ls')\n"
    )
    assert len(list(_io_uses(sample))) == 5


# --- agents take their settings as value objects -------------------------------------------

MAX_AGENT_PARAMETERS = 10


def test_every_agent_constructor_takes_at_most_ten_parameters() -> None:
    """Related settings travel as one frozen value object (``RunBudget``, ``DelegatedRun``,
    ``InnerAgentSpec``...), not as loose keywords repeated by every subclass. The OpenJarvis
    compatibility layer (``jarvis.compat``) is left out: its constructors are OpenJarvis's,
    keyword for keyword."""
    _import_everything()
    agents = [a for a in _subclasses(BaseAgent) if not a.__module__.startswith("jarvis.compat")]
    assert len(agents) > 10, "the agents were found"
    counts = {
        f"{agent.__module__}.{agent.__qualname__}": len(inspect.signature(agent).parameters)
        for agent in agents
    }
    assert {name: n for name, n in counts.items() if n > MAX_AGENT_PARAMETERS} == {}


# --- one drawn error tree ------------------------------------------------------------------

_ENTRY = re.compile(r"^(?P<branches>[ │├└─]*?)(?P<name>[A-Z]\w*Error)\b")
_HOME = re.compile(r"\[(?P<module>[\w.]+)\]\s*$")


@dataclass(frozen=True, slots=True)
class DrawnError:
    name: str
    parent: str
    module: str


def _drawn_tree(docstring: str) -> dict[str, DrawnError]:
    """The classes the drawing in ``jarvis.domain.errors`` names, with the parent each is
    drawn under (by indentation, four columns a level) and its module (``[module]`` on its
    line or the next ones; none: its parent's, and ``domain.errors`` at the top)."""
    drawing = docstring.split("::", 1)[1]
    drawn: dict[str, DrawnError] = {}
    parents: list[str] = []
    last = ""
    for line in drawing.splitlines():
        body = line[4:]  # the block's indentation
        entry = _ENTRY.match(body)
        if entry is not None:
            depth = len(entry["branches"]) // 4
            parents[depth:] = [entry["name"]]
            last = entry["name"]
            parent = parents[depth - 1] if depth else ""
            home = drawn[parent].module if parent else "domain.errors"
            drawn[last] = DrawnError(last, parent, home)
        named = _HOME.search(line)
        if named is not None and last:
            drawn[last] = DrawnError(last, drawn[last].parent, named["module"])
    return drawn


def test_the_drawn_error_tree_names_every_error_class_where_it_is() -> None:
    _import_everything()
    drawn = _drawn_tree(errors.__doc__ or "")
    real = {
        cls.__name__: DrawnError(
            cls.__name__,
            next(b.__name__ for b in cls.__bases__ if issubclass(b, errors.JarvisError)),
            cls.__module__.removeprefix("jarvis."),
        )
        for cls in _subclasses(errors.JarvisError)
    }
    assert len(real) > 30, "the error classes were found"
    assert len({cls.__name__ for cls in _subclasses(errors.JarvisError)}) == len(real)
    assert drawn.pop("JarvisError").parent == ""
    assert drawn == real


# --- every type: ignore says why -----------------------------------------------------------

_IGNORE = re.compile(r"#\s*type:\s*ignore\b")
_EXPLAINED_IGNORE = re.compile(r"#\s*type:\s*ignore\[[\w, -]+\]\s+#\s*\w.{4,}")
"""``# type: ignore[code]  # why``: the code (ruff's PGH003 also asks for it) and a reason."""


def _comments(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as source:
        for token in tokenize.tokenize(source.readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string


def _unexplained_ignores(path: Path) -> Iterator[int]:
    for line, comment in _comments(path):
        if _IGNORE.search(comment) and not _EXPLAINED_IGNORE.search(comment):
            yield line


def test_every_type_ignore_in_the_sources_says_why() -> None:
    found = [
        f"{path.relative_to(SRC).as_posix()}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        for line in _unexplained_ignores(path)
    ]
    assert found == []


def test_the_ignore_rule_tells_a_reason_from_none(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "a = 1  # type: ignore\n"
        "b = 2  # type: ignore[assignment]\n"
        "c = 3  # type: ignore[assignment]  # the stub is wrong\n"
        "d = '# type: ignore'\n"
    )
    assert list(_unexplained_ignores(sample)) == [1, 2]


# --- functions read in one screen ------------------------------------------------------------

MAX_FUNCTION_LINES = 60


def _long_functions(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(name, lines) of every function longer than the limit, from ``def`` to its end."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                yield node.name, lines


def test_no_function_of_the_domain_or_the_application_is_over_sixty_lines() -> None:
    found = {
        f"{path} {name}": lines
        for part in ("domain", "application")
        for path, tree in _modules(part)
        for name, lines in _long_functions(tree)
    }
    assert found == {}


def test_the_function_measure_counts_from_def_to_end() -> None:
    body = "\n".join(f"    x = {n}" for n in range(MAX_FUNCTION_LINES - 1))
    fits = ast.parse(f"def fits():\n{body}\n")
    over = ast.parse(f"async def over():\n{body}\n    return x\n")
    assert list(_long_functions(fits)) == []
    assert list(_long_functions(over)) == [("over", MAX_FUNCTION_LINES + 1)]


# --- modules small enough to read -----------------------------------------------------------

MAX_MODULE_LINES = 500

LONGER_MODULES = {
    "adapters/subprocess_repl/worker.py": "run as one file in the sandbox (standard library only)",
}
"""The modules allowed past the limit, and why (remove an entry once its module fits)."""


def test_no_module_is_over_five_hundred_lines() -> None:
    lengths = {
        path.relative_to(SRC).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in SRC.rglob("*.py")
    }
    over = {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES}
    assert {path: n for path, n in over.items() if path not in LONGER_MODULES} == {}
    fitting = sorted(path for path in LONGER_MODULES if lengths.get(path, 0) <= MAX_MODULE_LINES)
    assert fitting == [], "these fit now: remove them from LONGER_MODULES"


# --- the domain is imported at the top of a module ------------------------------------------


def _names_the_domain(node: ast.Import | ast.ImportFrom, path: str) -> bool:
    if isinstance(node, ast.Import):
        return any(
            a.name == "jarvis.domain" or a.name.startswith("jarvis.domain.") for a in node.names
        )
    if node.level:  # relative: within the domain, it names a domain module
        return path.startswith("domain/")
    module = node.module or ""
    if module == "jarvis":
        return any(alias.name == "domain" for alias in node.names)
    return module == "jarvis.domain" or module.startswith("jarvis.domain.")


def _local_domain_imports(path: str, tree: ast.Module) -> Iterator[str]:
    """Imports of domain modules inside a function (a method, a nested function)."""
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom) and _names_the_domain(node, path):
                    yield f"{path} line {node.lineno} (in {function.name})"


def test_no_function_imports_a_domain_module() -> None:
    """The domain is small, pure and cheap to import: a module names the domain modules it
    uses at its top, where its dependencies can be read. What must load late does so
    through a module of its own (a command's work), or a table of module names (the agent
    registry's built-in agents, the package's public names)."""
    found = sorted({hit for path, tree in _modules() for hit in _local_domain_imports(path, tree)})
    assert found == []


def test_the_local_import_scan_finds_what_it_looks_for() -> None:
    sample = ast.parse(
        "from jarvis.domain.errors import JarvisError\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from jarvis.domain.ports import ToolPort\n"
        "def a():\n    from jarvis.domain.errors import ConfigurationError\n"
        "async def b():\n    import jarvis.domain.traces\n"
        "class C:\n    def m(self):\n        def inner():\n            from jarvis import domain\n"
        "def d():\n    from .records import x\n    from jarvis.domainish import y\n"
        "    from jarvis.application.ask import Answer\n"
    )
    outside = list(_local_domain_imports("entrypoints/cli/x.py", sample))
    assert outside == [
        "entrypoints/cli/x.py line 6 (in a)",
        "entrypoints/cli/x.py line 8 (in b)",
        "entrypoints/cli/x.py line 12 (in m)",
        "entrypoints/cli/x.py line 12 (in inner)",
    ]
    inside = list(_local_domain_imports("domain/sessions/x.py", sample))
    assert "domain/sessions/x.py line 14 (in d)" in inside
