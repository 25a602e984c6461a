"""Logs are JSON lines with extra fields, and never carry secrets."""

from __future__ import annotations

import json
import logging

import pytest

from bot.logs import JsonFormatter, scrub


def _format(msg: str, **extra: object) -> dict[str, object]:
    record = logging.LogRecord("askhuman.test", logging.INFO, __file__, 1, msg, None, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return json.loads(JsonFormatter().format(record))


def test_extra_fields_become_json_keys() -> None:
    line = _format("decided", request="r_abc", outcome="accepted")
    assert (line["msg"], line["request"], line["outcome"], line["level"]) == (
        "decided", "r_abc", "accepted", "info")


def test_token_shapes_are_masked() -> None:
    line = _format("call failed", url="https://x/api?token=xoxb-123-456-abcdef")
    assert "xoxb-123" not in json.dumps(line)
    assert scrub("app token xapp-1-A0-123-abc") == "app token ***"


def test_configured_secret_values_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cr3t-signing-value")
    line = _format("bad signature with s3cr3t-signing-value")
    assert "s3cr3t-signing-value" not in json.dumps(line)


def test_secrets_changed_after_startup_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The secret values are cached between scrubs; a changed environment (a rotated
    token, a key set by a test or a reload) must still be seen by the next scrub."""
    assert scrub("value first-secret-value") == "value first-secret-value"
    monkeypatch.setenv("ACME_API_KEY", "first-secret-value")
    assert scrub("value first-secret-value") == "value ***"
    monkeypatch.setenv("ACME_API_KEY", "second-secret-value")
    assert scrub("first-secret-value second-secret-value") == "first-secret-value ***"
    monkeypatch.delenv("ACME_API_KEY")
    assert scrub("second-secret-value") == "second-secret-value"


def test_extras_never_overwrite_the_lines_own_keys() -> None:
    """A ``ts`` extra (Slack's message ts) once replaced the line's timestamp."""
    line = _format("slack card delivered", ts="1712345678.000100", level="x", logger="y")
    stamp = str(line["ts"])
    assert stamp != "1712345678.000100" and stamp[:2] == "20" and "T" in stamp
    assert (line["level"], line["logger"], line["msg"]) == (
        "info", "askhuman.test", "slack card delivered")
    assert (line["extra_ts"], line["extra_level"], line["extra_logger"]) == (
        "1712345678.000100", "x", "y")
def test_provider_keys_bearer_values_and_url_passwords_are_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "plain-looking-value-123")
    text = ("Incorrect API key provided: sk-proj-abcDEF123456789xyz; key sk-ant-api03-abcdefghij"
            "klmnop; Authorization: Bearer abc.def.ghijklmnopqrst; api_key=zzzzzzzzzzzzzz; "
            "postgresql+psycopg://askhuman:hunter2hunter2@db:5432/x; plain-looking-value-123")
    masked = scrub(text)
    for secret in ("sk-proj-abc", "sk-ant-api03", "abc.def.ghij", "zzzzzzzzzzzzzz", "hunter2",
                   "plain-looking-value-123"):
        assert secret not in masked
    assert "postgresql+psycopg://askhuman:***@db:5432/x" in masked
    assert scrub("a normal sentence about skills and tasks") == (
        "a normal sentence about skills and tasks")


def test_scrub_json_masks_nested_strings() -> None:
    from bot.logs import scrub_json

    assert scrub_json({"error": ["token xoxb-1-2-abc", {"k": "sk-abcdefghijklmnop"}], "n": 3}) == {
        "error": ["token ***", {"k": "***"}], "n": 3}

