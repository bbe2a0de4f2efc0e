"""Declaring a tool from a typed Python function, so embedding apps add tools in a few lines.

::

    @tool(category="weather")
    def forecast(city: str, days: int = 1) -> dict[str, float]:
        \"\"\"Temperature forecast for a city.

        Args:
            city: The city name, e.g. "Lisbon".
            days: How many days ahead (1-7).
        \"\"\"

The JSON schema comes from the signature (pydantic), the descriptions from the docstring
(or ``Annotated[int, Field(description=...)]``). Arguments are validated and coerced by the
same pydantic model before the function runs, so a model's ``"3"`` arrives as ``3`` and a
wrong type comes back to the model as a failed result it can correct. Sync functions run in
a worker thread, async ones are awaited. A sync function that always returns at once (a
small computation, no I/O) can say so with ``@tool(blocking=False)``: it is then called
directly on the event loop, which saves the thread hop (and the task the executor would
give it) on every call — but gets no timeout, and would stall every concurrent run if it
ever blocked. The result is text: a ``str`` as is, ``None`` as
``(no output)``, anything else as JSON (dicts, lists, dataclasses, pydantic models) or
``str()``; returning a :class:`ToolResult` gives full control. An exception raised by the
function becomes a failed result naming it.

The decorated object is still callable like the original function.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypedDict, TypeVar, Unpack, cast, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from jarvis.application.tools.docstrings import parse_docstring
from jarvis.domain.errors import ConfigurationError, ToolError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.ports import ToolPort
from jarvis.domain.tools.specs import ToolResult, ToolSpec

P = ParamSpec("P")
R = TypeVar("R")

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI-compatible engines accept as a function name."""

NO_OUTPUT = "(no output)"
_DATA_KEYWORDS = frozenset({"default", "examples", "const", "enum"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


@dataclasses.dataclass(frozen=True, slots=True)
class _Parameter:
    name: str
    field: str
    positional_only: bool


class FunctionTool(Generic[P, R]):
    """A ToolPort around a typed Python function. Build it with :meth:`from_function`."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        spec: ToolSpec,
        arguments: type[BaseModel],
        parameters: tuple[_Parameter, ...],
    ) -> None:
        self.fn = fn
        self._spec = spec
        self._arguments = arguments
        self._parameters = parameters
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an instance with an async __call__
        )
        self.__doc__ = fn.__doc__
        self.__name__ = spec.name

    @classmethod
    def from_function(
        cls,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        category: str = "",
        timeout_seconds: float = 30.0,
        side_effects: bool = False,
        blocking: bool = True,
        destructive: bool = False,
    ) -> FunctionTool[P, R]:
        """Derive the spec and the argument validator from ``fn``'s signature and docstring.

        Raises ToolError when ``fn`` cannot be a tool: ``*args``/``**kwargs``, a parameter
        without a type annotation, a name engines would refuse, or no description.
        """
        tool_name = name if name is not None else getattr(fn, "__name__", "")
        if not TOOL_NAME.match(tool_name):
            raise ToolError(
                f"Invalid tool name {tool_name!r}.",
                hint="Use 1-64 letters, digits, '_' or '-', e.g. name='lookup_order'.",
            )
        doc = parse_docstring(inspect.getdoc(fn))
        text = (description if description is not None else doc.description).strip()
        if not text:
            raise ToolError(
                f"Tool '{tool_name}' has no description.",
                hint="Write a docstring for the function or pass description=...",
            )
        model, parameters = _arguments_model(fn, tool_name, doc.parameters)
        spec = ToolSpec(
            name=tool_name,
            description=text,
            parameters=_tool_schema(model),
            category=category,
            timeout_seconds=timeout_seconds,
            side_effects=side_effects or destructive,
            blocking=blocking,
            destructive_hint=True if destructive else None,
        )
        return cls(fn, spec=spec, arguments=model, parameters=parameters)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the wrapped function directly, as if it had not been decorated."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self._spec.name!r})"

    async def execute(self, arguments: JSONObject) -> ToolResult:
        name = self._spec.name
        try:
            parsed = self._arguments.model_validate(arguments)
        except ValidationError as exc:
            return ToolResult(
                tool_name=name,
                content=f"Error: invalid arguments for '{name}': {_explain(exc)}",
                success=False,
            )
        positional = [getattr(parsed, p.field) for p in self._parameters if p.positional_only]
        keywords = {
            p.name: getattr(parsed, p.field) for p in self._parameters if not (p.positional_only)
        }
        call: Callable[..., Any] = self.fn
        try:
            if self._is_async:
                value = await call(*positional, **keywords)
            else:
                if self._spec.blocking:
                    value = await asyncio.to_thread(call, *positional, **keywords)
                else:
                    value = call(*positional, **keywords)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            return ToolResult(
                tool_name=name, content=f"Error: {type(exc).__name__}: {exc}", success=False
            )
        if isinstance(value, ToolResult):
            return dataclasses.replace(value, tool_name=name)
        return ToolResult(tool_name=name, content=render_result(value))


class ToolSettings(TypedDict, total=False):
    """The keyword arguments of :func:`tool`: those of :meth:`FunctionTool.from_function`,
    where their defaults are."""

    name: str | None
    description: str | None
    category: str
    timeout_seconds: float
    side_effects: bool
    blocking: bool
    destructive: bool


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(**settings: Unpack[ToolSettings]) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None, /, **settings: Unpack[ToolSettings]
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a typed function into a tool: ``@tool`` or ``@tool(name=..., category=...)``.

    ``blocking=False`` declares that the function always returns at once (see the module
    docstring): it then runs on the event loop instead of a worker thread.
    ``side_effects=True`` (the tool changes something outside the run) or
    ``destructive=True`` (it may delete or overwrite) make approval policies ask before it
    runs; a tool that declares neither is read-only and runs without asking."""

    unknown = sorted(settings.keys() - ToolSettings.__optional_keys__)
    if unknown:  # refused here, as a signature that named them would
        raise TypeError(f"tool() got an unexpected keyword argument {unknown[0]!r}")

    def wrap(function: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool.from_function(function, **settings)

    return wrap(fn) if fn is not None else wrap


def as_tool(candidate: ToolPort | Callable[..., object]) -> ToolPort:
    """``candidate`` if it already is a tool, else the typed function turned into one.

    An object whose ``as_tool()`` gives its tool (OpenJarvis's ``BaseTool``, whose
    ``execute`` is synchronous) is replaced by that tool: the application layer cannot
    name the compatibility classes, so they say it themselves."""
    convert = getattr(candidate, "as_tool", None)
    if callable(convert) and not isinstance(candidate, type):
        converted: object = convert()
        if hasattr(converted, "spec") and hasattr(converted, "execute"):
            return cast(ToolPort, converted)
    if hasattr(candidate, "spec") and hasattr(candidate, "execute"):
        return cast(ToolPort, candidate)
    if callable(candidate):
        return FunctionTool.from_function(candidate)
    raise ConfigurationError(f"{candidate!r} is neither a tool nor a function.")


def render_result(value: object) -> str:
    """The text the model sees for a function's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return NO_OUTPUT
    try:
        return json.dumps(to_jsonable_python(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _arguments_model(
    fn: Callable[..., object], tool_name: str, documented: dict[str, str]
) -> tuple[type[BaseModel], tuple[_Parameter, ...]]:
    """A pydantic model with one field per parameter.

    Fields get neutral internal names (``p0``, ``p1``...) and the parameter name as alias,
    so parameters called ``json``, ``schema`` or ``model_config`` cannot clash with
    BaseModel's own attributes.
    """
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolError(f"Cannot read the signature of tool '{tool_name}': {exc}") from exc
    fields: dict[str, Any] = {}
    parameters: list[_Parameter] = []
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ToolError(
                f"Tool '{tool_name}' cannot take *{parameter.name}/**{parameter.name}.",
                hint="Declare every argument the model may pass as a named parameter.",
            )
        if parameter.name not in hints:
            raise ToolError(
                f"Parameter '{parameter.name}' of tool '{tool_name}' has no type annotation.",
                hint="Annotate it (e.g. 'city: str') so its JSON schema can be derived.",
            )
        annotation = hints[parameter.name]
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        description = _own_description(annotation) or documented.get(parameter.name)
        field_name = f"p{index}"
        fields[field_name] = (
            annotation,
            Field(default, alias=parameter.name, description=description),
        )
        parameters.append(
            _Parameter(
                name=parameter.name,
                field=field_name,
                positional_only=parameter.kind is parameter.POSITIONAL_ONLY,
            )
        )
    model: type[BaseModel] = create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    return model, tuple(parameters)


def _own_description(annotation: object) -> str | None:
    """A description given in ``Annotated[..., Field(description=...)]`` or a plain string."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    for meta in reversed(typing.get_args(annotation)[1:]):
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
        if isinstance(meta, str) and meta.strip():
            return meta.strip()
    return None


def _tool_schema(model: type[BaseModel]) -> JSONObject:
    """The model's JSON schema, tidied for a language model.

    Titles are dropped (noise), and references to ``$defs`` are inlined unless a type is
    recursive, so simple validators and small models see a self-contained schema.
    """
    raw: JSONValue = to_jsonable_python(model.model_json_schema(by_alias=True))
    assert isinstance(raw, dict)
    defs = raw.pop("$defs", None)
    definitions = defs if isinstance(defs, dict) else {}
    kept: set[str] = set()
    schema = _inline(_without_titles(raw), definitions, (), kept)
    assert isinstance(schema, dict)
    if kept:
        schema["$defs"] = {key: _without_titles(value) for key, value in definitions.items()}
    schema.setdefault("properties", {})
    return schema


def _without_titles(node: JSONValue) -> JSONValue:
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned: JSONObject = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYWORDS:
            cleaned[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            cleaned[key] = {name: _without_titles(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _without_titles(value)
    return cleaned


def _inline(
    node: JSONValue, definitions: JSONObject, trail: tuple[str, ...], kept: set[str]
) -> JSONValue:
    if isinstance(node, list):
        return [_inline(item, definitions, trail, kept) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.removeprefix("#/$defs/")
        target = definitions.get(key)
        if key in trail or not isinstance(target, dict):
            kept.add(key)
            return node
        merged: JSONObject = {**_without_titles_dict(target)}
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return _inline(merged, definitions, (*trail, key), kept)
    inlined: JSONObject = {}
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            inlined[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            inlined[key] = {
                name: _inline(sub, definitions, trail, kept) for name, sub in value.items()
            }
        else:
            inlined[key] = _inline(value, definitions, trail, kept)
    return inlined


def _without_titles_dict(node: JSONObject) -> JSONObject:
    cleaned = _without_titles(node)
    assert isinstance(cleaned, dict)
    return cleaned


def _explain(error: ValidationError) -> str:
    """Pydantic's errors in a form a model can act on: ``where: what`` per problem."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown argument"
        problems.append(f"{where}: {message}")
    return "; ".join(problems)
