"""A standing grant revoked from Slack takes effect at once: the next matching call over
the API door gets a card again (the grant approved the one before, without a card)."""

from __future__ import annotations

from bot.engine.ports import Identity
from bot.tools.binding import binding_hash
from tests.api.conftest import Client, Door
from tests.slack.conftest import ALICE
from tests.slack.test_grants_chat import add_grant, revoke_payload

CALL = {"command": "ls /srv", "timeout": 30}


async def ask(door: Door, ci: Client) -> str:
    body = {"route": "fin", "tool_name": "Bash", "args": CALL}
    created = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    assert created.status_code == 201, created.text
    return str(created.json()["ref"])


async def test_revoke_from_slack_then_the_next_call_gets_a_card(door: Door, ci: Client) -> None:
    grant_id = add_grant(door.database, door.engine.ctx.now(), route="fin", agent="ci-bot",
                         tool="Bash", args=CALL, binding=binding_hash("Bash", CALL, {}),
                         by=Identity("slack", ALICE, "Alice"))
    first = await ask(door, ci)
    decided = (await door.get(ci, first, wait=5)).json()
    assert decided["decision"] is not None and decided["decision"]["approved"] is True
    assert not door.slack.fake.calls_to("chat.postMessage")  # approved without a card

    payload = revoke_payload(ALICE, grant_id)
    payload["response_url"] = door.slack.fake.response_url("revoke")
    assert (await door.slack.interact(payload)).status_code == 200
    await door.slack.wait_until(lambda: door.slack.fake.response_url_calls, what="revoked")
    assert door.slack.fake.response_url_calls[-1]["text"].startswith(
        f"Revoked standing grant G-{grant_id}")

    second = await ask(door, ci)
    await door.slack.wait_for_card("C0FIN")
    assert (await door.get(ci, second)).json()["decision"] is None
