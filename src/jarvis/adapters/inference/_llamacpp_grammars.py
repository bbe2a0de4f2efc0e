"""The typed-answer half of the embedded engine: JSON schemas made into GBNF grammars.

Kept apart from :mod:`.llamacpp` so that the engine module stays about running the model,
and this one about what a structured answer is held to.
"""

from __future__ import annotations

import json
import threading

from jarvis.domain.errors import StructuredOutputNotSupportedError
from jarvis.domain.json_types import JSONObject


class SchemaGrammars:
    """The GBNF grammar of each JSON schema asked for, made once by llama.cpp's own schema
    converter (a typed answer's schema is the same on every attempt and every run).

    The converter is asked directly rather than through ``response_format``, which falls
    back to "any JSON" when it cannot convert a schema: here such a schema is refused as
    :class:`StructuredOutputNotSupportedError`, so that the typed answer knows the engine
    does not enforce it and checks the reply itself.
    """

    MAX_KEPT = 16

    def __init__(self, engine: str) -> None:
        self._engine = engine
        self._kept: dict[str, object] = {}
        self._lock = threading.Lock()

    def grammar(self, schema: JSONObject | None) -> object:
        """A ``llama_cpp.LlamaGrammar`` for ``schema`` (any JSON object when ``None``)."""
        key = "" if schema is None else json.dumps(schema, sort_keys=True)
        with self._lock:
            found = self._kept.get(key)
        if found is not None:
            return found
        from llama_cpp import llama_grammar

        try:
            text = llama_grammar.JSON_GBNF if schema is None else _gbnf(key)
        except Exception as exc:  # the converter raises bare exceptions of every kind
            raise StructuredOutputNotSupportedError(
                f"llama.cpp cannot turn the answer's schema into a grammar: {exc}",
                engine=self._engine,
            ) from None
        made = llama_grammar.LlamaGrammar.from_string(text, verbose=False)
        with self._lock:
            if len(self._kept) >= self.MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = made
        return made


def _gbnf(schema_text: str) -> str:
    from llama_cpp import llama_grammar

    text: str = llama_grammar.json_schema_to_gbnf(schema_text)
    return text
