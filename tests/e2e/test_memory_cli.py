"""``jarvis memory`` end to end: the real CLI in a subprocess over real files (the project's
own README and source tree, and a few hundred generated files), its real SQLite file."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from jarvis.adapters.minilm_embeddings import available as minilm_available
from tests.support.hostile_pdfs import looping_pdf, one_page, surrogate_pdf

ROOT = Path(__file__).resolve().parents[2]
EXIT_USAGE = 2
EXIT_STORE_DAMAGED = 7


def jarvis(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    done = jarvis(*args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def refused(code: int, *args: str) -> str:
    done = jarvis(*args)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stderr


def pdf(text: str, *, font: bytes = b"", trailer: bytes = b"") -> bytes:
    """A one-page PDF showing ``text`` in Helvetica; ``font`` and ``trailer`` add entries to
    the font's and the trailer's dictionaries."""
    return one_page(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode(), font=font, trailer=trailer)


def test_pdf_and_html_are_read_as_text(jarvis_home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "island.pdf").write_bytes(pdf("The quokka lives on Rottnest Island"))
    (docs / "page.html").write_text(
        "<html><head><title>Harbour</title><script>var quokka = 1;</script></head>"
        "<body><p>The lighthouse keeper feeds pelicans.</p></body></html>"
    )
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a PDF")
    done = jarvis("memory", "add", str(docs / "island.pdf"), str(docs / "page.html"),
                  str(docs / "broken.pdf"), "--no-embed")  # fmt: skip
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "broken.pdf was not added: it is" in done.stderr
    assert "a PDF that cannot be read" in done.stderr
    assert "Traceback" not in done.stderr
    hits = json.loads(ok("memory", "search", "quokka", "--mode", "keyword", "--json").stdout)
    assert [h["source"] for h in hits] == [str(docs / "island.pdf")]  # not the page's script
    [page] = json.loads(ok("memory", "search", "pelicans", "--mode", "keyword", "--json").stdout)
    assert page["text"] == "Harbour\nThe lighthouse keeper feeds pelicans."


def test_a_pdf_pypdf_fails_on_in_its_own_way_costs_only_itself(
    jarvis_home: Path, tmp_path: Path
) -> None:
    """An encryption pypdf does not implement (NotImplementedError inside it) is skipped
    like any unreadable PDF in a folder, and the others are added; a PDF whose names carry
    escape sequences adds no line of pypdf's own to stderr."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The ferry leaves at dawn.")
    (docs / "b-locked.pdf").write_bytes(
        pdf("secret", trailer=b"/Encrypt << /Filter /Standard /V 99 /R 99 >> ")
    )
    (docs / "c-odd.pdf").write_bytes(
        pdf("The wombat digs burrows", font=b"/Encoding /Evil#1b#5d0;TITLE#07#1b#5b2J ")
    )
    (docs / "d.md").write_text("The lighthouse is white.")
    done = jarvis("memory", "add", str(docs), "--no-embed", "--verbose")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "3 added" in done.stdout
    assert "b-locked.pdf" in done.stderr  # named by --verbose as the one skipped
    assert "Traceback" not in done.stderr
    assert "\x1b" not in done.stderr
    assert "not implemented" not in done.stderr  # pypdf's own message, silenced
    listed = ok("memory", "list").stdout
    assert all(name in listed for name in ("a.md", "c-odd.pdf", "d.md"))
    assert "b-locked.pdf" not in listed


def test_a_pdf_built_to_loop_costs_only_its_limit_and_the_folder_is_added(
    jarvis_home: Path, tmp_path: Path
) -> None:
    """A PDF of about 1 KB whose page would keep pypdf busy for about 20 s here (hours with
    larger numbers in the same few bytes) is stopped at ``[memory] pdf_page_seconds`` and
    named; the folder's other files are added."""
    (jarvis_home / "config.toml").write_text("[memory]\npdf_page_seconds = 1\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The ferry leaves at dawn.")
    (docs / "b-loop.pdf").write_bytes(looping_pdf())
    (docs / "c.pdf").write_bytes(pdf("The wombat digs burrows"))
    done = jarvis("memory", "add", str(docs), "--no-embed", "--verbose")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "2 added" in done.stdout
    assert "b-loop.pdf" in done.stderr
    assert "takes too long to read (over 1 s of CPU for a page" in done.stderr
    assert "Traceback" not in done.stderr
    named = jarvis("memory", "add", str(docs / "b-loop.pdf"), "--no-embed")
    assert named.returncode == EXIT_USAGE, (named.stdout, named.stderr)
    assert "takes too long to read" in named.stderr
    listed = ok("memory", "list").stdout
    assert "a.md" in listed
    assert "c.pdf" in listed
    assert "b-loop.pdf" not in listed


def test_a_pdf_whose_font_makes_lone_surrogates_is_added_with_the_rest(
    jarvis_home: Path, tmp_path: Path
) -> None:
    """Text no UTF-8 store takes once failed the whole add (exit 1, the folder's other files
    never added): such characters are replaced."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-surrogate.pdf").write_bytes(surrogate_pdf())
    (docs / "b-notes.txt").write_text("The zebra crossing is on Main Street.")
    done = jarvis("memory", "add", str(docs), "--no-embed")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "2 added" in done.stdout
    hits = json.loads(ok("memory", "search", "zebra", "--json").stdout)
    assert [hit["source"] for hit in hits] == [str(docs / "b-notes.txt")]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The README, the source tree, and 300 generated notes (one about a unique subject)."""
    docs = tmp_path / "docs"
    shutil.copytree(
        ROOT / "src" / "jarvis", docs / "src", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "README.md", docs / "README.md")
    notes = docs / "notes"
    notes.mkdir()
    for n in range(300):
        (notes / f"note{n:03}.md").write_text(
            f"# Note {n}\n\nMeeting {n} decided budget item {n * 7}.\n\n"
            f"## Follow-up\n\nOwner {n % 13} reports on {n % 5} Fridays.\n",
            encoding="utf-8",
        )
    (notes / "note150.md").write_text(
        "# Note 150\n\nThe zanzibar ferry leaves from pier nine.\n", encoding="utf-8"
    )
    return docs


def test_a_real_folder_is_added_searched_and_resynced(jarvis_home: Path, corpus: Path) -> None:
    first = json.loads(
        ok("memory", "add", str(corpus), "--recursive", "--no-embed", "--json").stdout
    )
    files = len(list(corpus.rglob("*.*")))
    assert len(first["added"]) == files
    assert first["chunks"] > files
    database = jarvis_home / "memory.db"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600

    hits = json.loads(
        ok("memory", "search", "zanzibar ferry", "--mode", "keyword", "--json").stdout
    )
    assert hits[0]["source"] == str(corpus / "notes" / "note150.md")
    assert hits[0]["citation"] == f"[{corpus / 'notes' / 'note150.md'}:1]"
    code = json.loads(ok("memory", "search", "BeneathOpener openat2", "-k", "3", "--json").stdout)
    assert any(h["source"].endswith("beneath.py") for h in code)
    # a sentence of the README's exit codes table, which only errors.py's list repeats
    readme = json.loads(
        ok("memory", "search", "reader of stdout goes away early", "--json", "--mode",
           "keyword").stdout
    )  # fmt: skip
    assert any(h["source"].endswith("README.md") for h in readme)

    again = json.loads(
        ok("memory", "add", str(corpus), "--recursive", "--no-embed", "--json").stdout
    )
    assert again["added"] == again["updated"] == []
    assert len(again["unchanged"]) == files

    (corpus / "notes" / "note150.md").write_text("# Note 150\n\nThe ferry was cancelled.\n")
    (corpus / "notes" / "note007.md").unlink()
    synced = json.loads(ok("memory", "sync", "--json").stdout)
    assert synced["removed"] == [str(corpus / "notes" / "note007.md")]
    assert synced["updated"] == [str(corpus / "notes" / "note150.md")]
    assert len(synced["unchanged"]) == files - 2
    assert ok("memory", "search", "zanzibar", "--mode", "keyword").stdout.strip() == "No matches."
    stats = json.loads(ok("memory", "stats", "--json").stdout)
    assert stats["sources"] == files - 1

    listed = json.loads(ok("memory", "list", "--json").stdout)
    assert len(listed) == files - 1
    ok("memory", "remove", str(corpus / "README.md"))
    assert len(json.loads(ok("memory", "list", "--json").stdout)) == files - 2
    assert "not in the knowledge base" in refused(EXIT_USAGE, "memory", "remove", "/no/such")


@pytest.mark.skipif(not minilm_available(), reason="all-MiniLM-L6-v2 is not installed")
def test_semantic_search_finds_a_chunk_sharing_no_word(jarvis_home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.txt").write_text("Felines enjoy sleeping in warm sunny places.\n")
    (docs / "tax.txt").write_text("Quarterly invoices must be filed before the deadline.\n")
    (docs / "space.txt").write_text("The rocket reached orbit after a second burn.\n")
    ok("memory", "add", str(docs))
    query = "kitty napping during sunshine"
    every_word = set(" ".join(p.read_text() for p in docs.iterdir()).lower().split())
    assert not set(query.split()) & every_word
    assert ok("memory", "search", query, "--mode", "keyword").stdout.strip() == "No matches."
    for mode in ("semantic", "hybrid"):
        hits = json.loads(ok("memory", "search", query, "--mode", mode, "-k", "1", "--json").stdout)
        assert [h["source"] for h in hits] == [str(docs / "cats.txt")], mode
    assert json.loads(ok("memory", "stats", "--json").stdout)["embedded_chunks"] == 3


def test_bad_input_is_refused_with_a_message_and_no_traceback(
    jarvis_home: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nKept text.\n")
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2)
    (docs / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    outside = tmp_path / "outside.md"
    outside.write_text("secret plans\n")
    (docs / "link.md").symlink_to(outside)
    (jarvis_home / "config.toml").write_text("[memory]\nmax_file_bytes = 1000\n")
    (docs / "huge.txt").write_text("x" * 5000)

    assert "no such file" in refused(EXIT_USAGE, "memory", "add", str(tmp_path / "missing.md"))
    assert "binary" in refused(EXIT_USAGE, "memory", "add", str(docs / "photo.png"))
    assert "secret" in refused(EXIT_USAGE, "memory", "add", str(docs / "id_ed25519"))
    assert "symbolic link" in refused(EXIT_USAGE, "memory", "add", str(docs / "link.md"))
    assert "1000-byte limit" in refused(EXIT_USAGE, "memory", "add", str(docs / "huge.txt"))
    assert "jarvis config dir" in refused(
        EXIT_USAGE, "memory", "add", str(jarvis_home / "config.toml")
    )
    assert "Name files" in refused(EXIT_USAGE, "memory", "add")
    assert "Unknown search mode" in refused(EXIT_USAGE, "memory", "search", "x", "--mode", "magic")

    folder = jarvis("memory", "add", str(docs), "--verbose", "--no-embed")
    assert folder.returncode == 0, folder.stderr
    assert "1 added" in folder.stdout
    assert "4 skipped" in folder.stdout
    assert f"skipped {docs / 'link.md'}: a symbolic link" in folder.stderr
    listed = [row["source"] for row in json.loads(ok("memory", "list", "--json").stdout)]
    assert listed == [str(docs / "good.md")]
    assert (
        ok("memory", "search", "secret plans", "--mode", "keyword").stdout.strip() == "No matches."
    )


def test_a_damaged_database_is_exit_7_and_left_untouched(jarvis_home: Path) -> None:
    database = jarvis_home / "memory.db"
    garbage = b"this is not an SQLite database at all\n" * 200
    database.write_bytes(garbage)
    for args in (("memory", "stats"), ("memory", "search", "x"), ("memory", "list")):
        assert "cannot be read" in refused(EXIT_STORE_DAMAGED, *args)
    assert database.read_bytes() == garbage


def test_a_url_must_be_a_public_address(jarvis_home: Path) -> None:
    message = refused(EXIT_USAGE, "memory", "add", "--url", "http://127.0.0.1:9/notes.html")
    assert "only public internet addresses" in message
    assert "ftp" in refused(EXIT_USAGE, "memory", "add", "--url", "ftp://example.com/x")
