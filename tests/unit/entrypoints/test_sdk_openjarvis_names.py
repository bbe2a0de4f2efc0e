"""The SDK under OpenJarvis's names: ``Jarvis(engine_key=...)``, ``list_models()``,
``list_engines()``, ``memory.index(...)`` and ``async for`` over ``ask_stream(...)``
(the samples themselves run in ``tests/compat/test_sdk_samples.py``)."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest

from jarvis import Jarvis
from jarvis.domain.errors import ConfigurationError
from jarvis.testing import ScriptedInference


@pytest.fixture
def no_embedding(jarvis_home: Path) -> None:
    (jarvis_home / "config.toml").write_text("[memory]\nembed = false\n", encoding="utf-8")


def test_engine_key_is_the_engine() -> None:
    assert Jarvis(engine_key="vllm").config.engine.name == "vllm"
    assert Jarvis(engine="vllm", engine_key="vllm").config.engine.name == "vllm"


def test_engine_and_a_different_engine_key_are_refused() -> None:
    with pytest.raises(ConfigurationError) as refused:
        Jarvis(engine="ollama", engine_key="vllm")
    assert "engine='ollama' and engine_key='vllm' name different engines" in str(refused.value)


def test_list_engines_and_models() -> None:
    with Jarvis(inference=ScriptedInference()) as j:
        assert j.list_engines() == ["ollama", "vllm", "openai", "llamacpp"]
        assert j.list_models() == ["scripted-model"]


def test_ask_stream_is_async_iterable_on_the_callers_loop() -> None:
    j = Jarvis(inference=ScriptedInference(["one two three"]))

    async def main() -> list[str]:
        try:
            return [piece async for piece in j.ask_stream("q")]
        finally:
            await j.aclose()

    assert asyncio.run(main()) == ["one ", "two ", "three"]
    assert j._loop is None  # no loop thread was started: the caller's loop streamed


def test_one_stream_is_iterated_one_way() -> None:
    with Jarvis(inference=ScriptedInference(["a b", "c"])) as j:
        stream = j.ask_stream("q")
        assert next(stream) == "a "
        with pytest.raises(RuntimeError, match="iterated already"):
            stream.__aiter__()
        stream.close()
        assert list(j.ask_stream("q")) == ["c"]


@pytest.mark.usefixtures("no_embedding")
def test_index_adds_a_folder_recursively_in_openjarvis_shape(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("# A\n\nAlpha deployment.\n", encoding="utf-8")
    (tmp_path / "sub" / "b.txt").write_text("Beta configuration.\n", encoding="utf-8")
    with Jarvis(inference=ScriptedInference()) as j:
        first = j.memory.index(str(tmp_path), chunk_size=512)
        again = j.memory.index(str(tmp_path))
        [hit] = j.memory.search("configuration", mode="keyword")
        stats = j.memory.stats()
    sources = sorted([str(tmp_path / "a.md"), str(tmp_path / "sub" / "b.txt")])
    assert first == {"chunks": 2, "doc_ids": sources, "path": str(tmp_path), "unchanged": []}
    assert (again["chunks"], again["doc_ids"], again["unchanged"]) == (2, [], sources)
    assert (hit["source"], hit["content"]) == (sources[1], "Beta configuration.")
    assert hit["metadata"] == {"line": 1, "end_line": 1, "citation": f"[{sources[1]}:1]"}
    assert (stats["backend"], stats.get("count"), stats.chunks) == ("sqlite", 2, 2)
    # as plain dicts are used: membership, iteration, len, dict(), items
    assert "score" in hit
    assert "nothing" not in stats
    assert list(hit) == ["content", "score", "source", "metadata"]
    assert len(hit) == 4
    assert dict(stats)["backend"] == "sqlite"
    assert dict(hit.items()) == dict(zip(hit.keys(), hit.values(), strict=True))


@pytest.mark.usefixtures("no_embedding")
def test_index_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with Jarvis(inference=ScriptedInference()) as j:
        with pytest.raises(FileNotFoundError, match="Path not found"):
            j.memory.index(str(tmp_path / "missing"))
        with pytest.raises(ConfigurationError, match="chunk_overlap"):
            j.memory.index(str(tmp_path), chunk_size=64, chunk_overlap=64)
        with pytest.raises(ConfigurationError, match="chunk_size must be a whole number"):
            j.memory.index(str(tmp_path), chunk_size="big")  # type: ignore[arg-type]


@pytest.mark.usefixtures("no_embedding")
def test_index_says_other_chunk_sizes_are_not_applied(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("Alpha.\n", encoding="utf-8")
    with Jarvis(inference=ScriptedInference()) as j, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        j.memory.index(str(tmp_path), chunk_size=512, chunk_overlap=64)
        assert seen == []
        j.memory.index(str(tmp_path), chunk_size=100)
    assert "[memory] chunk_chars" in str(seen[0].message)
