"""``sdk_objects``: the click path's ``P2CardActionTrigger`` and reply JSON are exactly
what lark-oapi's own constructor and ``JSON.marshal`` make (and its errors the SDK's)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lark_oapi.core.exception import UnmarshalException
from lark_oapi.core.json import JSON
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.platforms.feishu import sdk_objects
from bot.platforms.feishu.handlers.toasts import RECEIVED, toast
from renderers.i18n import CATALOG
from renderers.words import said
from tests.fakes.feishu_signing import card_action_event


def _same(ours: Any, theirs: Any, where: str = "") -> None:
    """Same classes, same attributes, same values, all the way down."""
    assert type(ours) is type(theirs), where
    if hasattr(theirs, "__dict__") and not isinstance(theirs, type):
        assert list(vars(ours)) == list(vars(theirs)), where
        for name, value in vars(theirs).items():
            _same(vars(ours)[name], value, f"{where}.{name}")
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for key, value in theirs.items():
            _same(ours[key], value, f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where


def _click(**changes: Any) -> dict[str, Any]:
    payload = card_action_event(token="t", operator="ou_a", value={"r": "ref", "a": "ok"},
                                form_value={"f_x": "o1", "f_y": ["a", "b"]},
                                message_id="om_1", chat_id="oc_1")
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = payload
        for name in parents:
            target = target[name]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return payload


PLAIN = [
    _click(),
    _click(event__action__form_value=KeyError),  # a button outside a form
    _click(event__action__options=["a", "b"], event__action__checked=True,
           event__action__option="o2", event__action__timezone="Asia/Shanghai"),
    _click(event__action__options=("a", "b")),  # a tuple is kept as a list, like the SDK
    _click(event__action__value=None, event__context=None, event__operator=None),
    _click(event__operator__open_id=42, header__create_time=1700000000000),  # not checked
    _click(event__surprise={"x": 1}, header__surprise="x", surprise=[1]),  # unknown keys
    _click(event__action__form_value={"f": {"nested": [1, {"k": None}]}}),
    _click(event=KeyError),
    _click(header=KeyError, schema=KeyError, token="t1", type="card", uuid="u", ts="1"),
    {},
]

REFUSED = [
    _click(event__operator="ou_a"),  # an object that is not a dict
    _click(event__action__value=["r", "a"]),  # a dict field that is not a dict
    _click(event__action__options="a"),  # a list field that is not a list
    _click(header="h"),
    _click(event="e"),
]


@pytest.mark.parametrize("payload", PLAIN)
def test_trigger_builds_what_the_sdk_builds(payload: dict[str, Any]) -> None:
    before = copy.deepcopy(payload)
    _same(sdk_objects.trigger(payload), P2CardActionTrigger(copy.deepcopy(payload)))
    assert payload == before  # the parsed body is not changed


@pytest.mark.parametrize("payload", REFUSED)
def test_trigger_refuses_what_the_sdk_refuses_with_its_exception(
    payload: dict[str, Any],
) -> None:
    with pytest.raises(UnmarshalException) as theirs:
        P2CardActionTrigger(copy.deepcopy(payload))
    with pytest.raises(UnmarshalException) as ours:
        sdk_objects.trigger(payload)
    assert str(ours.value) == str(theirs.value)


def test_a_key_naming_a_class_attribute_goes_to_the_sdk() -> None:
    payload = _click(_types={"event": None})
    built = sdk_objects.trigger(copy.deepcopy(payload))
    _same(built, P2CardActionTrigger(copy.deepcopy(payload)))


def test_nested_objects_do_not_share_mutable_defaults() -> None:
    one, two = sdk_objects.trigger({}), sdk_objects.trigger({})
    assert one.event is None and two.event is None
    assert sdk_objects.trigger(_click()).event is not sdk_objects.trigger(_click()).event


@pytest.mark.parametrize("locale", sorted(CATALOG))
def test_encode_writes_what_json_marshal_writes_for_every_toast(locale: str) -> None:
    replies = [toast("info", RECEIVED, locale), toast("error", said("click.too_old"), locale),
               toast("success", "plain text, 中文", locale), toast("error", "", locale),
               P2CardActionTriggerResponse({})]
    replies += [toast(kind, said(key), locale) for kind in ("success", "error")
                for key in CATALOG[locale] if key.startswith(("click.", "refused."))][:40]
    for reply in replies:
        assert sdk_objects.encode(reply) == str(JSON.marshal(reply)).encode()


def test_encode_leaves_other_replies_to_json_marshal() -> None:
    card = P2CardActionTriggerResponse({"toast": {"type": "info", "content": "x"},
                                        "card": {"type": "raw", "data": {"a": None}}})
    odd = P2CardActionTriggerResponse({"toast": {"type": "info", "content": "x",
                                                 "i18n": {"en_us": None}}})
    for reply in (card, odd, {"msg": None}):
        assert sdk_objects.encode(reply) == str(JSON.marshal(reply)).encode()
