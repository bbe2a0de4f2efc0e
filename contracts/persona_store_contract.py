"""The behaviour every PersonaStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import threading
from typing import ClassVar, Generic, TypeVar

import pytest

from jarvis.domain.errors import PersonaError
from jarvis.domain.ports import PersonaFile, PersonaStorePort

StoreT = TypeVar("StoreT", bound=PersonaStorePort)

SOUL, MEMORY, USER = PersonaFile.SOUL, PersonaFile.MEMORY, PersonaFile.USER


class PersonaStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh store with no files, built with
    ``max_read_bytes=READ_LIMIT``, and the three back-door hooks below."""

    READ_LIMIT: ClassVar[int] = 1024

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    def put(
        self, store: StoreT, kind: PersonaFile, content: str | bytes, persona: str | None = None
    ) -> None:
        """Write a file's bytes behind the port's back (creating the persona's folder)."""
        raise NotImplementedError

    def raw(self, store: StoreT, kind: PersonaFile, persona: str | None = None) -> bytes | None:
        """A file's bytes, read behind the port's back; ``None`` when it does not exist."""
        raise NotImplementedError

    def make_persona(self, store: StoreT, name: str) -> None:
        """Create an empty named persona."""
        raise NotImplementedError

    # -- reading -------------------------------------------------------------------------

    def test_a_fresh_store_has_no_files_and_no_personas(self, store: StoreT) -> None:
        assert store.load(None) == ()
        assert store.names() == []

    def test_default_files_load_in_soul_memory_user_order(self, store: StoreT) -> None:
        self.put(store, USER, "I am Ada.")
        self.put(store, MEMORY, "- likes tea")
        self.put(store, SOUL, "Be brief. ✓")
        documents = store.load(None)
        assert [d.kind for d in documents] == [SOUL, MEMORY, USER]
        assert [d.text for d in documents] == ["Be brief. ✓", "- likes tea", "I am Ada."]
        assert all(d.warnings == () and d.omitted_bytes == 0 for d in documents)
        assert documents[0].source == store.location(SOUL)

    def test_missing_and_empty_files_are_left_out(self, store: StoreT) -> None:
        self.put(store, SOUL, "")
        self.put(store, MEMORY, " \n\t\n")
        assert store.load(None) == ()

    def test_every_load_reads_the_current_text(self, store: StoreT) -> None:
        self.put(store, SOUL, "first")
        assert store.load(None)[0].text == "first"
        self.put(store, SOUL, "second")
        assert store.load(None)[0].text == "second"

    def test_a_named_persona_loads_its_own_files_only(self, store: StoreT) -> None:
        self.put(store, SOUL, "default soul")
        self.put(store, MEMORY, "default memory")
        self.put(store, SOUL, "work soul", persona="work")
        [document] = store.load("work")
        assert (document.kind, document.text) == (SOUL, "work soul")
        assert document.source == store.location(SOUL, "work")
        assert document.source != store.location(SOUL)

    def test_names_lists_the_personas_sorted(self, store: StoreT) -> None:
        for name in ("zeta", "alpha", "mid"):
            self.make_persona(store, name)
        assert store.names() == ["alpha", "mid", "zeta"]
        assert store.load("alpha") == ()

    @pytest.mark.parametrize(
        "bad", ["", " ", "../outside", "..", "a/b", "a\\b", ".hidden", "x\x00y", "x" * 65]
    )
    def test_names_that_could_escape_are_refused(self, store: StoreT, bad: str) -> None:
        self.make_persona(store, "work")
        with pytest.raises(PersonaError, match="Invalid persona name") as caught:
            store.load(bad)
        assert "work" in caught.value.hint
        with pytest.raises(PersonaError):
            store.location(SOUL, bad)

    def test_an_unknown_persona_is_an_error_listing_the_existing_ones(self, store: StoreT) -> None:
        self.make_persona(store, "work")
        self.make_persona(store, "home")
        with pytest.raises(PersonaError, match="Unknown persona 'wrok'") as caught:
            store.load("wrok")
        assert "home, work" in caught.value.hint

    def test_unknown_persona_without_any_says_how_to_create_one(self, store: StoreT) -> None:
        with pytest.raises(PersonaError) as caught:
            store.load("work")
        assert "personas/<name>/SOUL.md" in caught.value.hint

    def test_undecodable_bytes_are_replaced_and_warned_about(self, store: StoreT) -> None:
        self.put(store, SOUL, b"caf\xe9 ol\xff\xfe!")
        [document] = store.load(None)
        assert document.text == "caf\ufffd ol\ufffd\ufffd!"
        assert any("not valid UTF-8" in w for w in document.warnings)

    def test_a_byte_order_mark_is_dropped(self, store: StoreT) -> None:
        self.put(store, SOUL, b"\xef\xbb\xbfhello")
        assert store.load(None)[0].text == "hello"

    def test_a_binary_file_is_skipped_with_a_warning(self, store: StoreT) -> None:
        self.put(store, MEMORY, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
        [document] = store.load(None)
        assert document.kind is MEMORY
        assert document.text == ""
        assert any("NUL bytes" in w for w in document.warnings)

    def test_a_file_over_the_read_limit_is_read_at_both_ends(self, store: StoreT) -> None:
        half = self.READ_LIMIT // 2
        body = "H" * half + "é" * 5000 + "T" * half
        self.put(store, MEMORY, body)
        [document] = store.load(None)
        assert document.omitted_bytes == len(body.encode()) - 2 * half
        assert document.text[: document.omitted_at] == "H" * half
        assert document.text[document.omitted_at :] == "T" * half
        assert any("read limit" in w for w in document.warnings)
        assert not any("UTF-8" in w for w in document.warnings)

    def test_a_multibyte_character_cut_at_the_read_edges_is_not_bad_utf8(
        self, store: StoreT
    ) -> None:
        self.put(store, SOUL, "x" + "ü" * self.READ_LIMIT + "y")  # both edges cut a "ü"
        [document] = store.load(None)
        assert document.text.startswith("xü")
        assert document.text.endswith("üy")
        assert set(document.text) == {"x", "ü", "y"}
        assert not any("UTF-8" in w for w in document.warnings)

    # -- editing -------------------------------------------------------------------------

    def test_edit_creates_the_file_and_the_next_load_sees_it(self, store: StoreT) -> None:
        seen: list[str] = []

        def change(text: str) -> str:
            seen.append(text)
            return text + "- likes tea\n"

        assert store.edit(MEMORY, change) == "- likes tea\n"
        assert seen == [""]
        assert self.raw(store, MEMORY) == b"- likes tea\n"
        assert store.load(None)[0].text == "- likes tea\n"
        assert store.edit(MEMORY, lambda text: text + "- ünï\n") == "- likes tea\n- ünï\n"

    def test_an_unchanged_text_writes_nothing(self, store: StoreT) -> None:
        assert store.edit(USER, lambda text: text) == ""
        assert self.raw(store, USER) is None

    def test_a_failing_change_leaves_the_file_as_it_was(self, store: StoreT) -> None:
        self.put(store, MEMORY, "- kept\n")

        def change(text: str) -> str:
            raise ValueError("refused")

        with pytest.raises(ValueError, match="refused"):
            store.edit(MEMORY, change)
        assert self.raw(store, MEMORY) == b"- kept\n"

    def test_edit_never_touches_a_named_persona(self, store: StoreT) -> None:
        self.put(store, MEMORY, "- work fact\n", persona="work")
        store.edit(MEMORY, lambda text: text + "- default fact\n")
        assert self.raw(store, MEMORY, "work") == b"- work fact\n"
        assert self.raw(store, MEMORY) == b"- default fact\n"

    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (b"\x00\x01binary", "NUL bytes"),
            (b"caf\xe9\n", "not valid UTF-8"),
            (b"- x\n" * 1000, "too large"),
        ],
    )
    def test_files_that_cannot_be_rewritten_safely_are_refused_and_kept(
        self, store: StoreT, content: bytes, reason: str
    ) -> None:
        self.put(store, MEMORY, content)
        with pytest.raises(PersonaError, match=reason):
            store.edit(MEMORY, lambda text: text + "- new\n")
        assert self.raw(store, MEMORY) == content

    def test_concurrent_editors_lose_no_entry(self, store: StoreT) -> None:
        def writer(worker: int) -> None:
            for i in range(15):
                line = f"- w{worker}-{i}\n"
                store.edit(MEMORY, lambda text: text + line)  # noqa: B023 (runs at once)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        data = self.raw(store, MEMORY)
        assert data is not None
        lines = data.decode().splitlines()
        assert sorted(lines) == sorted(f"- w{w}-{i}" for w in range(6) for i in range(15))

    def test_ensure_creates_an_empty_file_once_and_keeps_content(self, store: StoreT) -> None:
        assert store.ensure(SOUL) == store.location(SOUL)
        assert self.raw(store, SOUL) == b""
        self.put(store, SOUL, "Be kind.")
        store.ensure(SOUL)
        assert self.raw(store, SOUL) == b"Be kind."
