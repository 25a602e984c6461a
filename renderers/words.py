"""What askhuman tells one person, as a message key with parameters (``Said``).

The engine and the platform listeners decide *what* to say (a refusal, a toast, "already
decided by …", a validation error) where they know it, as ``said("refused.not_allowed")``;
the words are looked up in the person's locale only when shown, in the sentence
catalogues (``catalog_en``, ``catalog_zh``) or the card chrome (``i18n.CATALOG``). No
English sentence is ever parsed back: every key exists in both catalogues with the same
placeholders (``tests/renderers/test_words.py``).

Parameters are model- or admin-written values (labels, names, agent names, exception
texts from platforms) and are never translated; a parameter that is itself a ``Said``
(e.g. the reason in "Your answer could not be read: {reason}") is rendered in the same
locale. ``str(said)`` is the English text: logs, audit rows (audits are for admins) and
the API keep English.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from renderers import catalog_en, catalog_zh, i18n

VERBATIM = "verbatim"
"""The key whose template is ``{text}`` in every locale: text shown as it is (a stored
legacy message, a platform's exception text)."""

CATALOGUES: dict[str, dict[str, str]] = {
    "en": {**i18n.CATALOG["en"], **catalog_en.SENTENCES},
    "zh-CN": {**i18n.CATALOG["zh-CN"], **catalog_zh.SENTENCES},
}
"""Every key a ``Said`` may name, per locale: the card chrome plus the sentences."""

PLATFORM_KEYS: dict[str, str] = {
    "slack": "platform.slack",
    "feishu": "platform.feishu",
    "console": "platform.console",
    "api": "platform.api",
}
"""A platform id → the key of its display name ("Slack", "the console"); the engine
passes ids, never names."""


@dataclass(frozen=True)
class Said:
    """A message key and its parameters; ``text(locale)`` renders it."""

    key: str
    params: Mapping[str, Param] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted((k, str(v)) for k, v in self.params.items()))))

    def text(self, locale: str | None = None) -> str:
        """The words in ``locale`` (``en`` when the locale is unknown or lacks the key);
        ``KeyError`` for a key no catalogue has (the tests guarantee none is used)."""
        chosen = i18n.normalize(locale)
        template = CATALOGUES[chosen].get(self.key)
        if template is None:
            template = CATALOGUES[i18n.DEFAULT_LOCALE][self.key]
        if not self.params:
            return template
        return template.format(**{name: _render(value, chosen)
                                  for name, value in self.params.items()})

    def __str__(self) -> str:
        return self.text(i18n.DEFAULT_LOCALE)

    def map_text(self, change: Callable[[str], str]) -> Said:
        """The same words with ``change`` applied to every text parameter (nested ones
        too), e.g. ids swapped for names; templates are left alone."""
        return Said(self.key, {name: _mapped(value, change)
                               for name, value in self.params.items()})

    def texts(self) -> Iterable[str]:
        """Every text parameter, nested ones too (what ``map_text`` would change)."""
        for value in self.params.values():
            if isinstance(value, Said):
                yield from value.texts()
            elif isinstance(value, str):
                yield value

    def to_json(self) -> str:
        """The words as stored in a text column (``from_stored`` reads them back)."""
        return json.dumps(_encode(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_stored(cls, text: str) -> Said:
        """Words ``to_json`` stored; any other text (a row written before messages were
        keys, in English) comes back verbatim, and so does a key this version lacks."""
        try:
            found = _decode(json.loads(text))
        except (ValueError, TypeError, KeyError):
            found = None
        return found if found is not None else verbatim(text)


Param: TypeAlias = "str | int | float | Said"


def said(key: str, /, **params: Param) -> Said:
    """``said("refused.not_allowed")``, ``said("answer.recorded", label="Approve")``."""
    return Said(key, params)


def verbatim(text: str) -> Said:
    """Text shown as it is in every locale (never translated)."""
    return Said(VERBATIM, {"text": text})


def platform_name(platform: str) -> Said:
    """The display name of the platform ``platform`` ("Slack", "the console"); an id
    without one is shown as it is."""
    key = PLATFORM_KEYS.get(platform)
    return said(key) if key is not None else verbatim(platform)


def joined(items: Iterable[Said], key: str) -> Said:
    """``items`` joined by the separator template ``key`` (``"{a}; {b}"``, two at a time);
    an empty list is the empty text."""
    found: Said | None = None
    for item in items:
        found = item if found is None else said(key, a=found, b=item)
    return found if found is not None else verbatim("")


def _render(value: Param, locale: str) -> str:
    if isinstance(value, Said):
        return value.text(locale)
    return format(value)


def _mapped(value: Param, change: Callable[[str], str]) -> Param:
    if isinstance(value, Said):
        return value.map_text(change)
    return change(value) if isinstance(value, str) else value


def _encode(words: Said) -> dict[str, Any]:
    return {"key": words.key,
            "params": {name: {"said": _encode(value)} if isinstance(value, Said) else value
                       for name, value in words.params.items()}}


def _decode(data: object) -> Said | None:
    """``_encode``'s output back; None when ``data`` is not stored words of this version."""
    if not isinstance(data, dict) or not isinstance(data.get("key"), str) or not isinstance(
            data.get("params", {}), dict) or data["key"] not in CATALOGUES["en"]:
        return None
    params: dict[str, Param] = {}
    for name, value in data.get("params", {}).items():
        if isinstance(value, dict):
            nested = _decode(value.get("said"))
            if nested is None:
                return None
            params[str(name)] = nested
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            params[str(name)] = value
        else:
            return None
    return Said(data["key"], params)
