"""Every card status renders to blocks the fake (slack-sdk) accepts."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from renderers.card import RequestCard
from renderers.slack import render_request
from tests.fakes.slack_api import validate_blocks


def sample_card(**changes: object) -> RequestCard:
    args = AskHumanToolArgs.model_validate({
        "title": "Deploy <!here> v1?",
        "question": "Ship it? @channel",
        "fields": [{"type": "select", "name": "env", "label": "Env",
                    "options": [{"value": "a", "label": "A"}]}],
        "actions": [{"id": "ok", "label": "OK", "style": "primary"}],
    })
    card = RequestCard(ref="r" * 20, args=args, agent_name="deploy")
    return RequestCard(**{**card.__dict__, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("status", ["pending", "submitted", "timeout", "cancelled", "unavailable"])
def test_rendered_cards_pass_fake_validation(status: str) -> None:
    card = sample_card(status=status, decided_by_id="U1", decided_at=dt.datetime(2025, 1, 1),
                       action_label="OK", message="because")
    assert validate_blocks(render_request(card)["blocks"]) is None


def test_fake_rejects_invalid_blocks() -> None:
    assert validate_blocks([{"type": "nope"}]) is not None
    long_button = {"type": "actions", "elements": [
        {"type": "button", "text": {"type": "plain_text", "text": "x" * 80}, "action_id": "a"}]}
    assert validate_blocks([long_button]) is not None
