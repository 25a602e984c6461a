"""``/askhuman delegate`` on the served app: a delegate's click decides "for" the
delegator; after ``delegate revoke`` the same click is refused with a clear message."""

from __future__ import annotations

from sqlalchemy import select

from storage import AuditLog
from tests.slack.conftest import ALICE, APPROVALS, MALLORY, Slack

DAVE = "U0DAVE"  # not an approver: only through Alice's delegation


async def _reply(slack: Slack, text: str, user: str) -> str:
    before = len(slack.fake.response_url_calls)
    response = await slack.command(text, user=user)
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before, what="reply")
    reply = slack.fake.response_url_calls[before]
    assert reply["response_type"] == "ephemeral"
    return str(reply["text"])


async def test_delegate_answers_then_revoked_is_refused(slack: Slack) -> None:
    slack.fake.add_users([DAVE])
    said = await _reply(slack, f"delegate <@{DAVE}|dave> until 2099-01-01", ALICE)
    assert said.startswith("Until 2099-01-01 00:00 UTC, dave may answer"), said
    listed = await _reply(slack, "delegate list", ALICE)
    assert "You → dave until 2099-01-01 00:00 UTC" in listed
    unknown = await _reply(slack, "delegate @dave until 2099-01-01", ALICE)
    assert "can't tell who @dave is" in unknown

    await slack.command("run deploy ship v1.2.3")
    ts = await slack.wait_for_card()
    click = await slack.interact(slack.click_payload(ts, "Approve", DAVE, environment="o1"))
    assert click.status_code == 200
    await slack.wait_until(lambda: slack.request_row().status == "submitted", what="decision")
    row = slack.request_row()
    assert (row.decided_by_user, row.decided_via) == (ALICE, DAVE)
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    updated = str(slack.card_message(ts).blocks)
    assert "u0dave for u0alice" in updated and f"<@{ALICE}>" not in updated

    assert (await _reply(slack, "delegate revoke", ALICE)).startswith("Revoked 1")
    await slack.command("run deploy ship v1.2.4")
    def second_card() -> str | None:
        return next((m.ts for m in list(slack.fake.messages.values())
                     if m.channel == APPROVALS and m.blocks and m.ts != ts), None)

    await slack.wait_until(lambda: second_card() is not None, what="second card")
    ts2 = str(second_card())
    refused = await slack.interact(slack.click_payload(ts2, "Approve", DAVE, environment="o1"))
    assert refused.status_code == 200
    message = "Your delegation from u0alice was revoked, so you can no longer answer for them."
    await slack.wait_until(lambda: any(message in t for t in slack.ephemerals_to(DAVE)),
                           what="refusal")
    with slack.database.transaction() as session:
        events = [a.event for a in session.scalars(select(AuditLog))]
    assert "delegation_added" in events and "delegation_revoked" in events
    assert "can't tell" in await _reply(slack, "delegate revoke @x", MALLORY)


async def test_delegate_named_by_email_is_looked_up_in_the_workspace(slack: Slack) -> None:
    """An email is resolved to a member id through the Slack directory
    (``users.lookupByEmail``), so the delegation names the right person."""
    slack.fake.add_users([DAVE])
    slack.fake.emails["dave@example.com"] = DAVE
    said = await _reply(slack, "delegate dave@example.com until 2099-01-01", ALICE)
    assert said.startswith("Until 2099-01-01 00:00 UTC,"), said
    listed = await _reply(slack, "delegate list", ALICE)
    assert "You → dave@example.com until 2099-01-01 00:00 UTC" in listed, listed
    assert slack.fake.calls_to("users.lookupByEmail")
