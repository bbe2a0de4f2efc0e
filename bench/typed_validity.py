"""How often SmolLM2-135M (the embedded engine's default model) gives a valid typed answer.

    python -m bench.typed_validity [--prompts 50] [--max-tokens 64]

Fifty questions, each asked once for a simple schema (a city and its country, both
strings) on the embedded engine, greedily, with no retry (``output_retries=0``):

* with the grammar: the engine's normal path, the schema turned into a GBNF grammar;
* prompted only: the same question and instruction with the grammar withheld (what an
  engine without structured output gets), the reply decoded and checked alike;
* prompted, with the two default retries (the errors sent back).

A reply counts as valid when it decodes and matches the schema. The figures go into the
README's "Typed answers" section by hand (the run takes minutes: it is not part of
``bench.run``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace

from jarvis.domain.errors import OutputValidationError
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.ports import InferencePort

SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
}
COUNTRIES = (
    "France", "Italy", "Spain", "Germany", "Japan", "China", "India", "Brazil", "Canada",
    "Mexico", "Egypt", "Kenya", "Peru", "Chile", "Norway", "Sweden", "Poland", "Greece",
    "Turkey", "Russia", "Australia", "Argentina", "Portugal", "Ireland", "Vietnam",
)  # fmt: skip
TEMPLATES = ("What is the capital of {}?", "Name a large city in {}.")


def prompts(count: int) -> list[str]:
    every = [t.format(c) for t in TEMPLATES for c in COUNTRIES]
    return every[:count]


class WithoutGrammar:
    """The engine with every response format withheld: the prompt alone asks for the shape."""

    def __init__(self, inner: InferencePort) -> None:
        self.inner = inner

    @property
    def engine_id(self) -> str:
        return self.inner.engine_id

    @property
    def base_url(self) -> str:
        return self.inner.base_url

    async def generate(self, request: InferenceRequest) -> Completion:
        return await self.inner.generate(replace(request, response_format=None))

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        return self.inner.stream(replace(request, response_format=None))

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def health(self) -> bool:
        return await self.inner.health()

    async def aclose(self) -> None:
        return None


async def rate(
    engine: InferencePort, questions: list[str], retries: int, max_tokens: int, name: str
) -> int:
    from jarvis import Jarvis

    valid = 0
    async with Jarvis(inference=engine) as j:
        for done, question in enumerate(questions, 1):
            try:
                await j.aask(
                    question, output_type=SCHEMA, output_retries=retries, max_tokens=max_tokens
                )
                valid += 1
            except OutputValidationError:
                pass
            print(f"  {name}: {valid}/{done} valid so far", file=sys.stderr, flush=True)
    return valid


MODES = ("grammar", "prompt", "prompt-retries")


async def main_async(count: int, max_tokens: int, modes: tuple[str, ...] = MODES) -> None:
    from jarvis.adapters.inference.llamacpp import LlamaCppEngine

    engine = LlamaCppEngine(n_ctx=2048)
    questions = prompts(count)
    runs: dict[str, tuple[str, InferencePort, int]] = {
        "grammar": ("with the grammar, no retry", engine, 0),
        "prompt": ("prompted only, no retry", WithoutGrammar(engine), 0),
        "prompt-retries": ("prompted only, 2 retries", WithoutGrammar(engine), 2),
    }
    try:
        for name, port, retries in (runs[mode] for mode in modes):
            started = time.perf_counter()
            valid = await rate(port, questions, retries, max_tokens, name)
            seconds = time.perf_counter() - started
            print(f"{name}: {valid}/{len(questions)} valid ({seconds:.0f} s)", flush=True)
    finally:
        await engine.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description="valid typed answers of the embedded model")
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--only", choices=MODES, action="append", help="run only these")
    args = parser.parse_args()
    asyncio.run(main_async(args.prompts, args.max_tokens, tuple(args.only or MODES)))


if __name__ == "__main__":
    main()
