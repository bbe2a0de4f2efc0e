"""The error for a model the engine does not serve, naming the ones it does: written once
for the HTTP engines that can tell (Ollama, OpenAI-compatible servers)."""

from __future__ import annotations

from jarvis.domain.errors import InferenceError, ModelNotFoundError
from jarvis.domain.ports import InferencePort


async def model_not_found(engine: InferencePort, model: str, url: str) -> ModelNotFoundError:
    """``model`` is not served by ``engine``: the error lists the models it serves (none
    when listing them fails as well, which is not worth a second error)."""
    try:
        available = await engine.list_models()
    except InferenceError:
        available = []
    return ModelNotFoundError(model, available=available, engine=engine.engine_id, url=url)
