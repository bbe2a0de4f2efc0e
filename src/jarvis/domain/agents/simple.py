"""``simple``: system prompt + context + input, one inference, done."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

from jarvis.domain.llm.completion import FinishReason, Usage
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.updates import RunFinished, RunUpdate, TextDelta


class SimpleAgent(BaseAgent):
    """One model call; ``turns`` is always 1. Engine errors propagate as typed errors."""

    agent_id: ClassVar[str] = "simple"
    accepts_tools: ClassVar[bool] = False

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        self.run_started(input)
        try:
            completion = await self.generate(self.request(self.build_messages(input, context)))
        except BaseException as exc:
            self.run_stopped(exc)
            raise
        result = AgentResult(
            content=strip_think(completion.content),
            stop_reason="final_answer",
            turns=1,
            usage=completion.usage,
            model=completion.model or self.model,
            metadata={"finish_reason": completion.finish_reason},
        )
        self.run_ended(result)
        return result

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        self.run_started(input)
        parts: list[str] = []
        usage = Usage()
        model = self.model
        finish: FinishReason = "stop"
        try:
            async for chunk in self.stream_inference(
                self.request(self.build_messages(input, context))
            ):
                if chunk.content:
                    parts.append(chunk.content)
                    yield TextDelta(text=chunk.content)
                if chunk.is_final:
                    usage = chunk.usage or usage
                    finish = chunk.finish_reason or finish
                    model = chunk.model or model
        except BaseException as exc:
            self.run_stopped(exc)
            raise
        result = AgentResult(
            content=strip_think("".join(parts)),
            stop_reason="final_answer",
            turns=1,
            usage=usage,
            model=model,
            metadata={"finish_reason": finish},
        )
        self.run_ended(result)
        yield RunFinished(result=result)
