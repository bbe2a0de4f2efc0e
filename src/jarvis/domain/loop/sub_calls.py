"""How an agent answers the callbacks of the code it runs: ``llm_query``/``llm_batch`` go to
the sub-model through the agent's inference port, ``tool_call`` to the run's tools through a
:class:`ToolExecutor` (validation, timeouts, events, bounded output)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.tools.specs import ToolResult

Generate = Callable[[InferenceRequest], Awaitable[Completion]]


class SubCallBudgetExceeded(RuntimeError):
    """The run asked for more sub-model calls than it may make."""


class SubModelCallbacks:
    """The :class:`~jarvis.domain.repl.ReplCallbacks` of one run.

    ``llm_batch`` runs its prompts concurrently, at most ``max_concurrency`` at a time;
    at most ``max_calls`` sub-model calls are made in the whole run (a call past that
    fails inside the code, saying so). Usage of every sub-call is summed in :attr:`usage`,
    and every tool result is kept in :attr:`tool_results`.
    """

    def __init__(
        self,
        *,
        generate: Generate,
        model: str,
        temperature: float = 0.3,
        max_tokens: int = 1024,
        options: JSONObject | None = None,
        tools: ToolExecutor | None = None,
        max_concurrency: int = 16,
        max_calls: int = 100,
    ) -> None:
        self._generate = generate
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.options: JSONObject = dict(options or {})
        self._tools = tools
        self._semaphore = asyncio.Semaphore(max(1, max_concurrency))
        self.max_calls = max_calls
        self.calls = 0
        self.usage = Usage()
        self.tool_results: list[ToolResult] = []

    def _reserve(self, count: int) -> None:
        if self.calls + count > self.max_calls:
            raise SubCallBudgetExceeded(
                f"the run may make at most {self.max_calls} sub-model calls "
                f"({self.calls} made, {count} more asked for); answer with what you have"
            )
        self.calls += count

    async def _complete(self, prompt: str) -> str:
        request = InferenceRequest(
            messages=(Message.user(prompt),),
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            options=self.options,
        )
        async with self._semaphore:
            completion = await self._generate(request)
        self.usage = self.usage + completion.usage
        return strip_think(completion.content)

    async def llm_query(self, prompt: str) -> str:
        if not isinstance(prompt, str):
            raise TypeError(f"llm_query needs a str prompt, got {type(prompt).__name__}")
        self._reserve(1)
        return await self._complete(prompt)

    async def llm_batch(self, prompts: Sequence[str]) -> list[str]:
        if any(not isinstance(p, str) for p in prompts):
            raise TypeError("llm_batch needs a list of str prompts")
        self._reserve(len(prompts))
        outcomes = await asyncio.gather(
            *(self._complete(p) for p in prompts), return_exceptions=True
        )
        answers: list[str] = []
        for outcome in outcomes:
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, BaseException):
                answers.append(f"Error: {type(outcome).__name__}: {outcome}")
            else:
                answers.append(outcome)
        return answers

    async def tool_call(self, name: str, arguments: JSONObject) -> ToolResult:
        if self._tools is None or not self._tools.names:
            return ToolResult(
                tool_name=name,
                content="No tools are available to tool_call in this run.",
                success=False,
            )
        call = ToolCall(
            id=f"repl_call_{len(self.tool_results) + 1}", name=name, arguments=arguments
        )
        result = await self._tools.execute(call)
        self.tool_results.append(result)
        return result
