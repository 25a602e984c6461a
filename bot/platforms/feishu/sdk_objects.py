"""lark-oapi's callback objects, built and encoded the way the SDK does, for less CPU.

Every card click on ``/feishu/events`` became a ``P2CardActionTrigger`` through the
SDK's generic constructor (``lark_oapi.core.construct.init``: per field, ``hasattr``,
``typing`` introspection, recursion) and its toast reply went out through
``JSON.marshal`` (a ``deepcopy`` of every object's attributes). Measured on the click
path: ~33 µs and ~17 µs of CPU per click, a tenth of askhuman's own work per click
(``benchmarks/README.md``, "Feishu click path").

``trigger(payload)`` builds the *same* objects (the SDK's classes, every attribute
the SDK's ``__init__`` sets, nested objects, lists and dicts parsed by the same rules)
from a field plan made once per class from the SDK's own ``_types``; anything the
plan does not cover exactly (a key naming a class attribute, a value of a type the
SDK refuses) goes to the SDK's constructor, so its exception, and so the endpoint's
refusal, stays the SDK's. ``encode(reply)`` is ``JSON.marshal`` for the replies the
click path makes (a toast: strings and a dict of strings), and ``JSON.marshal``
itself for anything else. ``tests/feishu/test_sdk_objects.py`` holds both to the
SDK's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lark_oapi.core.construct import type_of
from lark_oapi.core.json import JSON
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    CallBackToast,
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)


class _NotPlain(Exception):
    """The payload needs the SDK's own constructor (it may raise there)."""


Parser = Callable[[Any], Any]


def _as_is(value: Any) -> Any:
    return value


def _parser(kind: Any) -> Parser:
    """``lark_oapi.core.construct.parse(kind, ·)`` with the type analysis done once."""
    if kind is None:
        return _as_is
    shape = type_of(kind)
    args = getattr(kind, "__args__", None)
    if shape in (list, tuple) or getattr(kind, "_name", None) == "List":
        if not args:
            return lambda v: v if v is None else _expect(v, (list, tuple))
        inner = _parser(args[0])
        return lambda v: v if v is None else [inner(i) for i in _expect(v, (list, tuple))]
    if shape is dict or getattr(kind, "_name", None) == "Dict":
        if not args:
            return lambda v: v if v is None else _expect(v, dict)
        values = _parser(args[1])
        return lambda v: v if v is None else {k: values(i) for k, i in _expect(v, dict).items()}
    if shape is object:
        return lambda v: v if v is None else _build(kind, _expect(v, dict))
    if shape in (set, frozenset) or getattr(kind, "_name", None) == "Set":
        raise _NotPlain  # no callback field is a set; leave it to the SDK
    return _as_is


def _expect(value: Any, kinds: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kinds):
        raise _NotPlain
    return value


class _Plan:
    """For one SDK class: the attributes its ``__init__`` sets (with their defaults)
    and a parser per field, from its ``_types``."""

    def __init__(self, cls: type) -> None:
        blank = cls()
        self.defaults = dict(vars(blank))
        self.mutable = [k for k, v in self.defaults.items() if isinstance(v, (dict, list))]
        types = dict(getattr(cls, "_types", {}))
        for base in cls.__mro__[1:]:  # P2CardActionTrigger adds EventContext's at init
            types.update(getattr(base, "_types", {}))
        self.parsers = {name: _parser(types.get(name)) for name in self.defaults}


_PLANS: dict[type, _Plan] = {}


def _build(cls: type, data: dict[str, Any]) -> Any:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    obj: Any = object.__new__(cls)
    attributes = dict(plan.defaults)
    for name in plan.mutable:
        attributes[name] = type(attributes[name])()
    parsers = plan.parsers
    for key, value in data.items():
        parse = parsers.get(key)
        if parse is None:
            if hasattr(cls, key):  # the SDK would set a class attribute: its way
                raise _NotPlain
            continue
        attributes[key] = parse(value)
    obj.__dict__.update(attributes)
    return obj


def trigger(payload: dict[str, Any]) -> P2CardActionTrigger:
    """``P2CardActionTrigger(payload)``, the same object, built without the SDK's
    per-call type introspection; the SDK's constructor where the plan does not apply."""
    try:
        built: P2CardActionTrigger = _build(P2CardActionTrigger, payload)
    except _NotPlain:
        return P2CardActionTrigger(payload)
    return built


def encode(reply: Any) -> bytes:
    """``JSON.marshal(reply).encode()``: for a toast-only reply (the SDK's classes, text
    and a dict of text) without the SDK's deepcopy; anything else through it."""
    if type(reply) is P2CardActionTriggerResponse:
        fields = vars(reply)
        toast = fields.get("toast")
        if type(toast) is CallBackToast and all(
                v is None for k, v in fields.items() if k != "toast"):
            plain = {k: v for k, v in vars(toast).items() if v is not None}
            if all(_text(v) for v in plain.values()):
                return json.dumps({"toast": plain}, ensure_ascii=False).encode()
    return str(JSON.marshal(reply)).encode()


def _text(value: Any) -> bool:
    """A value ``JSON.marshal`` writes as plain JSON: text, or a dict of text."""
    if isinstance(value, str):
        return True
    return type(value) is dict and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items())
