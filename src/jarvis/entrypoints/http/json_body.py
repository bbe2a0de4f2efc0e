"""The JSON replies of ``jarvis serve``, written whatever text they carry.

A run's text reaches the routes well-formed (the ask use case replaces each lone surrogate
by U+FFFD), but a route that relays the engine's own reply (``/v1/messages``, a chat
completion with the client's tools) or a stored message written before is not a run. A
lone surrogate anywhere in a reply would make the UTF-8 encoding fail and the request a
500; these writers then write the reply again with U+FFFD in its place. Ordinary replies
cost nothing more: the rewrite runs only after the encoding failed.
"""

from __future__ import annotations

import json
from typing import cast

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError
from starlette.responses import JSONResponse

from jarvis.domain.json_types import JSONValue
from jarvis.domain.well_formed import well_formed, well_formed_json


class JSONBody(JSONResponse):
    """Starlette's ``JSONResponse``, a lone surrogate in the content written U+FFFD."""

    def render(self, content: object) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return super().render(well_formed_json(cast(JSONValue, content)))


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, each lone surrogate written U+FFFD."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return well_formed(text).encode()


def model_json(model: BaseModel) -> str:
    """``model`` as compact JSON (``None`` fields left out), each lone surrogate U+FFFD
    (pydantic refuses to write one)."""
    try:
        return model.model_dump_json(exclude_none=True)
    except PydanticSerializationError:
        data = cast(JSONValue, model.model_dump(mode="json", exclude_none=True))
        return json.dumps(well_formed_json(data), ensure_ascii=False, separators=(",", ":"))
