"""Inference engines: OpenAI-compatible servers, vLLM, Ollama and embedded llama.cpp.

Each public module holds one adapter of :class:`~jarvis.domain.ports.InferencePort`; the
private modules hold what they share (HTTP with retries, SSE, tool-call assembly, the OpenAI
wire format). Nothing here is imported until the container builds an engine, so the
third-party libraries stay out of ``import jarvis``.
"""
