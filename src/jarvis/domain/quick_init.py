"""A faster constructor for the frozen dataclasses made on every run (events, spans).

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses); on the event loop, between two requests, that made building the
eight events and the spans of a run a large part of what recording it costs. A slot's own
descriptor sets it the same way for a third of the time: :func:`quick_init` gives the
class an ``__init__`` that does so, with the same signature, defaults and default
factories. Everything else of the dataclass (fields, repr, equality, hashing, immutability
from the outside, pickling) is left as it was.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from types import FunctionType, MemberDescriptorType
from typing import TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a field made by a factory, as ``inspect.signature`` shows it."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass with slots and keyword-only fields, without
    ``__post_init__`` or ``InitVar``), its ``__init__`` setting its slots through their
    descriptors. Anything else is refused when the class is made, not when it is used."""
    own = fields(cls)  # type: ignore[arg-type]  # a dataclass, checked by fields() itself
    if "__post_init__" in vars(cls) or not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__}: quick_init needs slots and no __post_init__")
    namespace: dict[str, object] = {"FACTORY": _FACTORY}
    parameters: list[str] = []
    body: list[str] = []
    for field in own:
        name = field.name
        if not (field.init and field.kw_only):
            raise TypeError(f"{cls.__name__}.{name}: quick_init sets keyword fields only")
        slot = getattr(cls, name, None)
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{name}: quick_init needs a slot")
        namespace[f"set_{name}"] = slot.__set__
        value = name
        if field.default is not MISSING:
            namespace[f"default_{name}"] = field.default
            parameters.append(f"{name}=default_{name}")
        elif field.default_factory is not MISSING:
            namespace[f"factory_{name}"] = field.default_factory
            parameters.append(f"{name}=FACTORY")
            value = f"factory_{name}() if {name} is FACTORY else {name}"
        else:
            parameters.append(name)
        body.append(f"    set_{name}(self, {value})")
    source = f"def __init__(self, *, {', '.join(parameters)}):\n" + "\n".join(body or ["pass"])
    exec(source, namespace)  # made from the class's own field names only
    init = namespace["__init__"]
    assert isinstance(init, FunctionType)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {field.name: field.type for field in own} | {"return": None}
    setattr(cls, "__init__", init)  # noqa: B010  # mypy refuses assigning a method
    return cls
