"""Words by key (``renderers.words``): every key the source uses is in both catalogues
with the same placeholders, no catalogue key is dead, and stored words read back."""

from __future__ import annotations

import ast
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from renderers import catalog_en, catalog_zh, words
from renderers.words import CATALOGUES, PLATFORM_KEYS, Said, platform_name, said, verbatim

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE_FILES = {ROOT / "renderers" / "catalog_en.py", ROOT / "renderers" / "catalog_zh.py",
                   ROOT / "renderers" / "i18n.py"}


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _sources() -> Iterator[Path]:
    for package in ("bot", "renderers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in CATALOGUE_FILES:
                yield path


def _said_calls() -> Iterator[tuple[str, ast.Call]]:
    """Every ``said(...)`` call in the source, with where it is."""
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "said":
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def _keys_of(call: ast.Call) -> list[str]:
    """The key(s) a call names: a literal, or both branches of ``"a" if x else "b"``."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return [first.value]
    if isinstance(first, ast.IfExp) and all(
            isinstance(b, ast.Constant) and isinstance(b.value, str)
            for b in (first.body, first.orelse)):
        return [first.body.value, first.orelse.value]  # type: ignore[union-attr]
    return []


def test_every_key_the_source_says_is_in_both_catalogues_with_its_parameters() -> None:
    calls = list(_said_calls())
    assert len(calls) > 100  # the scan finds the engine's and the platforms' words
    wrong = []
    for where, call in calls:
        keys = _keys_of(call)
        if not keys:
            if not where.startswith("renderers/words.py"):  # the helpers pass keys through
                wrong.append(f"{where}: the key is not a literal")
            continue
        given = {k.arg for k in call.keywords if k.arg is not None}
        spread = any(k.arg is None for k in call.keywords)  # said(key, **optional)
        for key in keys:
            for locale in ("en", "zh-CN"):
                template = CATALOGUES[locale].get(key)
                if template is None:
                    wrong.append(f"{where}: {key!r} is missing in {locale}")
                    continue
                needed = _placeholders(template)
                if given - needed or (not spread and needed - given):
                    wrong.append(f"{where}: {key!r} in {locale} takes {sorted(needed)}, "
                                 f"given {sorted(given)}")
    assert wrong == []


def test_both_catalogues_have_the_same_keys_and_placeholders() -> None:
    assert set(catalog_en.SENTENCES) == set(catalog_zh.SENTENCES)
    assert set(CATALOGUES["en"]) == set(CATALOGUES["zh-CN"])
    differ = [key for key, template in CATALOGUES["en"].items()
              if _placeholders(template) != _placeholders(CATALOGUES["zh-CN"][key])]
    assert differ == []
    # The sentences never shadow the card chrome.
    from renderers.i18n import CATALOG

    assert set(catalog_en.SENTENCES).isdisjoint(CATALOG["en"])


def _separators() -> set[str]:
    """The separator keys given to ``joined(items, "list.lines")``."""
    return {node.args[1].value for path in _sources()
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "joined" and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)}


def test_no_sentence_key_is_dead() -> None:
    """Each sentence key is named somewhere: in a ``said(...)`` call, as a separator of
    ``joined`` or in a key table (``PLATFORM_KEYS``, ``VERBATIM``)."""
    used = {key for _, call in _said_calls() for key in _keys_of(call)}
    used |= set(PLATFORM_KEYS.values()) | {words.VERBATIM} | _separators()
    assert _separators() <= set(CATALOGUES["en"])
    assert sorted(set(catalog_en.SENTENCES) - used) == []


def test_the_chinese_has_no_english_sentence_left() -> None:
    """A zh-CN sentence may keep names, commands and ids, never whole English words
    outside them (a catalogue entry copied but not translated)."""
    allowed = ("askhuman", "Slack", "slack", "API", "allow_external", "true", "false",
               "open_id", "ou_", "delegate", "revoke", "list", "until", "YYYY-MM-DD", "ISO",
               "UTC", "KB", "ID", "U…", "starters", "2026-12-24T09:00+08:00")
    english = []
    for key, template in catalog_zh.SENTENCES.items():
        rest = template
        for name in sorted(_placeholders(template), key=len, reverse=True):
            rest = rest.replace("{" + name + "}", "")
        for word in allowed:
            rest = rest.replace(word, "")
        if any(c.isascii() and c.isalpha() for c in rest) and key != "platform.slack":
            english.append((key, template))
    assert english == []


def test_words_render_in_the_locale_and_nest() -> None:
    reason = said("value.required", label="\u201cEnvironment\u201d")
    words_ = said("refused.unreadable", reason=reason)
    assert str(words_) == "Your answer could not be read: \u201cEnvironment\u201d is required"
    assert words_.text("zh-CN") == "无法读取你的回复：\u201cEnvironment\u201d 为必填项"
    assert words_.text("zh_CN") == words_.text("zh-CN")  # locales are normalized
    assert words_.text("fr") == str(words_) and words_.text(None) == str(words_)
    assert said("vote.progress", votes=1, needed=2, who="Ann (Approve)").text("zh-CN") == (
        "已记录，已批准 1/2：Ann (Approve)。")
    assert str(platform_name("console")) == "the console"
    assert str(platform_name("schedule")) == "schedule"  # no name: the id as it is
    with pytest.raises(KeyError):
        said("no.such.key").text()


def test_words_map_their_text_parameters_only() -> None:
    told = said("decided.by_choice", by="ou_1", choice=said("someone_on", platform="ou_2"))
    swapped = told.map_text(lambda text: text.replace("ou_", "name_"))
    assert sorted(told.texts()) == ["ou_1", "ou_2"]
    assert str(swapped) == "Already decided by name_1 (someone on name_2)."
    assert swapped.key == told.key and {said("db.down"): 1}[said("db.down")] == 1


def test_stored_words_round_trip_and_legacy_rows_are_read_verbatim() -> None:
    nested = said("decided.by_choice_at", by=said("someone_on", platform=platform_name("feishu")),
                  choice="Approve", when="2025-01-31 12:00 UTC")
    for words_ in (nested, said("db.down"), said("vote.progress", votes=1, needed=2.5, who="A"),
                   verbatim("as it was")):
        assert Said.from_stored(words_.to_json()) == words_
    assert Said.from_stored(nested.to_json()).text("zh-CN") == (
        "已由 飞书 上的某人 处理（Approve），时间 2025-01-31 12:00 UTC。")
    # A row written before messages were keys holds English: told as it is, everywhere.
    legacy = "Thanks, your answer (Approve) was recorded."
    assert Said.from_stored(legacy) == verbatim(legacy)
    assert Said.from_stored(legacy).text("zh-CN") == legacy
    # JSON that is not words of this version (an unknown key, a list) is text too.
    for odd in ('{"key": "gone.key", "params": {}}', "[1, 2]", '"quoted"', "42", ""):
        assert Said.from_stored(odd) == verbatim(odd)
