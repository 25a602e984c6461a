"""The upload modal is always acked with a readable reason, even when the engine fails."""

from __future__ import annotations

from typing import Any

from bot.askhuman.schema import AskHumanToolArgs
from bot.platforms.slack.listeners.views import UNAVAILABLE, FileSubmissionListener
from renderers import slack as render
from renderers.card import RequestCard

CARD = RequestCard(
    ref="req_upload_1",
    args=AskHumanToolArgs.model_validate({
        "question": "Upload the contract",
        "fields": [{"type": "file", "name": "contract", "label": "Contract"}],
    }),
    agent_name="upload",
)


class BrokenEngine:
    """Finds the card, then fails while storing the files (e.g. the database went away)."""

    async def card(self, ref: str) -> RequestCard | None:
        return CARD if ref == CARD.ref else None

    async def record_click(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("database is unavailable")

    async def audit_refusal(self, *args: Any) -> None:
        return None


async def test_engine_failure_is_shown_inline_in_the_modal() -> None:
    view = render.file_modal(CARD, "C1", "171.1", field_name="contract")
    view["state"] = {"values": {}}
    acks: list[dict[str, Any]] = []

    async def ack(**kwargs: Any) -> None:
        acks.append(kwargs)

    body = {"type": "view_submission", "user": {"id": "U1"}, "view": view}
    listener = FileSubmissionListener(BrokenEngine())  # type: ignore[arg-type]
    await listener(ack, body, client=None)  # type: ignore[arg-type]
    assert len(acks) == 1 and acks[0]["response_action"] == "errors"
    assert list(acks[0]["errors"].values()) == [UNAVAILABLE]
