"""Reading a function's docstring into a tool description and per-parameter descriptions.

Google (``Args:``), Sphinx (``:param x:``) and NumPy (``Parameters`` + dashes) styles are
understood; the description is everything before the first section.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_GOOGLE_SECTIONS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|Attributes|See Also|Warnings?)\s*:\s*$",
    re.IGNORECASE,
)
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:\s*(.*)$")
_GOOGLE_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_PARAM = re.compile(r"^(\w+)\s*(?::.*)?$")
_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args"}


@dataclass(frozen=True, slots=True)
class Docstring:
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: list[str]) -> str:
    return " ".join(part.strip() for part in lines if part.strip())


def parse_docstring(doc: str | None) -> Docstring:
    """Split ``doc`` into the description and the parameter descriptions it documents."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    base_indent = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if _GOOGLE_SECTIONS.match(stripped) and _indent(line) == 0:
            section, current = stripped.rstrip(":").strip().lower(), None
            index += 1
            continue
        if stripped and _NUMPY_UNDERLINE.match(following.strip()) and _indent(line) == 0:
            section, current = "numpy " + stripped.lower(), None
            index += 2
            continue
        sphinx = _SPHINX_FIELD.match(stripped)
        if sphinx:
            kind, target, text = sphinx.groups()
            section = "sphinx"
            current = None
            if kind in {"param", "parameter", "arg", "argument", "key", "keyword"} and target:
                current = target.split()[-1]
                params[current] = [text]
            index += 1
            continue
        if section is None:
            description.append(line)
        elif section.removeprefix("numpy ") in _PARAM_SECTIONS and stripped:
            numpy = section.startswith("numpy ")
            if current is None or _indent(line) <= base_indent:
                match = (_NUMPY_PARAM if numpy else _GOOGLE_PARAM).match(stripped)
                if match:
                    current = match.group(1).lstrip("*")
                    base_indent = _indent(line)
                    params[current] = [match.group(2)] if match.lastindex == 2 else []
                    index += 1
                    continue
            if current is not None:
                params[current].append(stripped)
        elif section == "sphinx" and current is not None and stripped:
            params[current].append(stripped)
        index += 1
    text = "\n".join(description).strip()
    text = re.sub(r"\n\s*\n+", "\n\n", text)
    return Docstring(
        description=text,
        parameters={name: _join(parts) for name, parts in params.items() if _join(parts)},
    )
