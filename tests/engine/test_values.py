"""Value checking against the request's own fields (pure; no database)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.values import InvalidValues, check_answer, check_values

ARGS = AskHumanToolArgs.model_validate({
    "question": "Q",
    "fields": [
        {"type": "multi-select", "name": "regions", "label": "Regions",
         "options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}]},
        {"type": "number", "name": "n", "label": "N", "min_value": 0},
        {"type": "checkbox", "name": "ok", "label": "I agree", "required": True},
        {"type": "date", "name": "due", "label": "Due"},
        {"type": "file", "name": "doc", "label": "Doc"},
    ],
})
BASE = {"ok": True}
DATE_REASON = "\u201cDue\u201d must be a date written as YYYY-MM-DD, e.g. 2025-01-31"


@pytest.mark.parametrize(("values", "expected"), [
    ({"regions": ["us", "eu", "us"]}, {"regions": ["us", "eu"]}),
    ({"regions": "eu"}, {"regions": ["eu"]}),
    ({"n": "42"}, {"n": 42}),
    ({"n": " 1.5 "}, {"n": 1.5}),
    ({"n": 3}, {"n": 3}),
    ({"ok": "true"}, {"ok": True}),
    ({"due": "2025-02-28"}, {"due": "2025-02-28"}),
    ({"doc": [{"platform": "slack", "id": "F1", "name": "a.pdf"}]},
     {"doc": [{"platform": "slack", "id": "F1", "name": "a.pdf", "mimetype": None,
               "size": None, "url": None}]}),
    ({"due": "", "n": None}, {}),
])
def test_valid_values_are_normalized(values: dict[str, Any], expected: dict[str, Any]) -> None:
    assert check_values(ARGS, {**BASE, **values}) == {**BASE, **expected}


@pytest.mark.parametrize(("values", "reason"), [
    ({"regions": ["eu", "mars"]}, "\u201cRegions\u201d may only contain: eu, us"),
    ({"n": "abc"}, "\u201cN\u201d must be a number"),
    ({"n": "nan"}, "\u201cN\u201d must be a number"),
    ({"n": True}, "\u201cN\u201d must be a number"),
    ({"n": "-1"}, "\u201cN\u201d must be at least 0"),
    ({"ok": False}, "\u201cI agree\u201d must be checked"),
    ({"ok": "maybe"}, "\u201cI agree\u201d must be checked or unchecked (true or false)"),
    ({"due": "31/01/2025"}, DATE_REASON),
    ({"due": "2025-02-30"}, DATE_REASON),
    ({"doc": [{"platform": "s", "id": "1"}, {"platform": "s", "id": "2"}]},
     "\u201cDoc\u201d accepts at most 1 file(s)"),
    ({"doc": [{"platform": "s", "id": "1", "evil": "x"}]},
     "\u201cDoc\u201d contains a file reference the bot does not accept"),
])
def test_invalid_values_have_clear_reasons(values: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidValues) as info:
        check_values(ARGS, {**BASE, **values})
    assert str(info.value) == reason


def test_action_is_checked_before_values() -> None:
    with pytest.raises(InvalidValues, match="no action \u201cgo\u201d; choose \u201cSubmit\u201d"):
        check_answer(ARGS.model_copy(update={"actions": []}).model_validate(
            {"question": "Q", "actions": [{"id": "submit", "label": "Submit"}]}), "go", {"x": 1})



@pytest.mark.parametrize(("values", "reason"), [
    ({"regions": ["eu"] * 10_000}, "\u201cRegions\u201d is too large to be an answer"),
    ({"regions": ["eu"] * 150}, "\u201cRegions\u201d accepts at most 100 choices"),
    ({"regions": ["eu", ["us", ["eu"]]]}, "\u201cRegions\u201d may only contain: eu, us"),
    ({"n": "9" * 5_000_000}, "\u201cN\u201d is too large to be an answer"),
    ({"doc": {"platform": "s", "id": "1", "size": -5}},
     "\u201cDoc\u201d contains a file with an invalid size"),
    ({"doc": {"platform": "s", "id": "1", "mimetype": {"a": {"b": {"c": {"d": "e"}}}}}},
     "\u201cDoc\u201d is nested too deeply to be an answer"),
    ({"x" * 1_000_000: "v"}, "This request has no field \u201c" + "x" * 63 + "\u2026\u201d"),
])
def test_oversize_values_are_refused(values: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidValues) as info:
        check_values(ARGS, {**BASE, **values})
    assert str(info.value) == reason


def test_file_list_without_max_files_is_still_bounded() -> None:
    args = AskHumanToolArgs.model_validate({"question": "Q", "fields": [
        {"type": "file-list", "name": "logs", "label": "Logs"}]})
    one = {"platform": "slack", "id": "F1"}
    assert len(check_values(args, {"logs": [one] * 20})["logs"]) == 20  # type: ignore[arg-type]
    with pytest.raises(InvalidValues, match="accepts at most 20 file"):
        check_values(args, {"logs": [one] * 21})
