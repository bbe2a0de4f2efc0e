"""The Python samples of OpenJarvis's agent documentation (``openjarvis_docs/``, copied
verbatim from OpenJarvis), extracted as the tests run them: a sample that drifts from
what jarvis runs fails the suite.

``agents-architecture.md`` fences its code (```` ```python ````); the user guide, a page
saved as text, does not: a sample there starts at a line ``from openjarvis ...`` /
``import ...`` and ends before the first line of prose (a line with letters outside ASCII,
or a heading ending in ``¶``) or a shell command (``jarvis ...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).parent / "openjarvis_docs"
ARCHITECTURE = DOCS / "agents-architecture.md"
GUIDE = DOCS / "agents-user-guide.th.md"


@dataclass(frozen=True, slots=True)
class Sample:
    source: str
    """``file:line`` of the sample's first line."""
    code: str

    def as_jarvis(self) -> str:
        """The sample with ``openjarvis`` replaced by ``jarvis`` in its imports only."""
        return re.sub(
            r"^(\s*)(from|import) openjarvis\b", r"\1\2 jarvis", self.code, flags=re.MULTILINE
        )


def fenced(path: Path) -> list[Sample]:
    text = path.read_text(encoding="utf-8")
    samples = []
    for match in re.finditer(r"```python\n(.*?)```", text, re.DOTALL):
        line = text.count("\n", 0, match.start(1)) + 1
        samples.append(Sample(f"{path.name}:{line}", match.group(1)))
    return samples


def _prose(line: str) -> bool:
    stripped = line.strip()
    return (
        any(ord(char) > 0x7F for char in stripped if char != "¶")
        or stripped.endswith("¶")
        or stripped.startswith("jarvis ")
    )


def unfenced(path: Path) -> list[Sample]:
    lines = path.read_text(encoding="utf-8").splitlines()
    samples: list[Sample] = []
    index = 0
    while index < len(lines):
        if not re.match(r"(from|import) [a-z_.]+", lines[index]):
            index += 1
            continue
        start = index
        while index < len(lines) and not _prose(lines[index]):
            index += 1
        body = lines[start:index]
        while body and (not body[-1].strip() or body[-1].lstrip().startswith("#")):
            body.pop()  # trailing blanks and the "# Via CLI" comment before a command
        samples.append(Sample(f"{path.name}:{start + 1}", "\n".join(body) + "\n"))
    return samples


def all_samples() -> list[Sample]:
    return [*fenced(ARCHITECTURE), *unfenced(GUIDE)]
