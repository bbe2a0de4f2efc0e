"""``from jarvis.engine.openai_compat_engines import VLLMEngine, ...``."""

from jarvis.compat.engines import (
    AppleFmEngine,
    ExoEngine,
    LemonadeEngine,
    LlamaCppEngine,
    LMStudioEngine,
    MLXEngine,
    NexaEngine,
    OpenAICompatEngine,
    SGLangEngine,
    UzuEngine,
    VLLMEngine,
)

__all__ = [
    "AppleFmEngine",
    "ExoEngine",
    "LMStudioEngine",
    "LemonadeEngine",
    "LlamaCppEngine",
    "MLXEngine",
    "NexaEngine",
    "OpenAICompatEngine",
    "SGLangEngine",
    "UzuEngine",
    "VLLMEngine",
]
