"""A person's Slack App Home: what waits for their answer, the standing grants they may
revoke (``renderers.slack.grants``, Revoke buttons ``ahg:{id}``), and the runs they
started.

Each pending request is shown with the same blocks as its card (``render_request``):
the same buttons, whose ``action_id`` (``ah:{ref}:{action}``) goes through the same
click path. Block ids must be unique within a view, and two requests may have fields
of the same name, so every ``block_id`` of a request gets the prefix ``{ref}|``;
``card_state`` strips it again so the stored click looks exactly like a card's.
File fields open a modal tied to a message, so Home points to the card for those.

Model-written text (titles, questions, labels, the person's own prompts) is escaped and
never translated; the chrome comes from ``renderers.i18n`` in the person's locale.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from renderers import i18n
from renderers.card import RequestCard, RunLine
from renderers.grants import GrantLine
from renderers.markdown import check_slack, slack_escape, truncate
from renderers.slack.batch_list import batch_blocks
from renderers.slack.edit_modal import EDIT_ACTION_PREFIX
from renderers.slack.grants import grant_blocks
from renderers.slack.ids import FILE_ACTION_PREFIX
from renderers.slack.kit import Block, context, plain_text, section
from renderers.slack.message import render_request
from renderers.words import said

MAX_BLOCKS = 100
"""Slack's limit for a Home tab view."""
RESERVED = 12
"""Blocks kept for the header, the notice and the runs list's heading and footer."""
MAX_TEXT_CHARS = 60000
"""Stay well inside what Slack accepts for one view."""
HOME_GRANTS = 10
"""Standing grants shown on Home (a note counts the rest; ``/askhuman grants`` lists
them all)."""
CALLBACK_ID = "askhuman_home"
SEPARATOR = "|"




def home_view(
    cards: Sequence[RequestCard],
    total: int,
    runs: Sequence[RunLine],
    *,
    locale: str | None = None,
    timezone: str | None = None,
    notice: str | None = None,
    now: dt.datetime | None = None,
    notice_ok: bool = False,
    grants: Sequence[GrantLine] = (),
    routes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``home`` view for one person: ``cards`` (of ``total`` they may answer), the
    standing ``grants`` they may revoke (a section only when there are some), their
    ``runs``, and an optional ``notice`` (what a click on Home did, told there because
    Slack offers no ephemeral message on Home; already safe mrkdwn; ``notice_ok``: a
    success rather than a refusal). With ``routes`` (ref → route), the requests that
    may be decided together are offered first with checkboxes
    (``renderers.slack.batch_list``), then each card in full."""
    with i18n.speaking(locale, timezone):
        blocks: list[Block] = [{"type": "header", "text": plain_text(i18n.t("home.title"), 150)}]
        if notice:
            blocks.append(section((":white_check_mark: " if notice_ok else ":warning: ")
                                  + notice))
        if now is not None:
            blocks.append(context(i18n.t("home.updated", when=i18n.format_when(now))))
        granted = ([{"type": "divider"}, *grant_blocks(grants, locale, HOME_GRANTS)]
                   if grants else [])
        batch = batch_blocks(cards, routes, locale, timezone) if routes is not None else []
        if any(b.get("type") == "actions" for b in batch):
            blocks += [section("*" + slack_escape(said("batch.heading").text(
                i18n.current_locale())) + "*"), *batch]
        request_blocks, shown = _requests(cards, locale, timezone,
                                          MAX_BLOCKS - RESERVED - len(blocks) - len(granted))
        blocks += request_blocks
        if not total:
            blocks.append(section(i18n.t("home.nothing")))
        elif shown < total:
            blocks.append(context(i18n.t("home.more", more=total - shown)))
        blocks += granted
        blocks += _runs(runs)
    view = {"type": "home", "callback_id": CALLBACK_ID, "private_metadata": "",
            "blocks": blocks[:MAX_BLOCKS]}
    check_slack({"blocks": view["blocks"]})
    return view


def _requests(
    cards: Sequence[RequestCard], locale: str | None, timezone: str | None,
    budget: int = MAX_BLOCKS - RESERVED,
) -> tuple[list[Block], int]:
    """As many whole cards as fit in ``budget`` blocks, with prefixed block ids."""
    out: list[Block] = []
    shown = 0
    chars = 0
    for card in cards:
        if locale:
            card = dataclasses.replace(card, locale=i18n.normalize(locale),
                                       timezone=timezone or card.timezone)
        blocks = [_for_home(card, block) for block in render_request(card)["blocks"]]
        size = sum(len(str(b)) for b in blocks)
        if len(out) + len(blocks) + 1 > budget or chars + size > MAX_TEXT_CHARS:
            break
        out += [{"type": "divider"}, *blocks]
        chars += size
        shown += 1
    return out, shown


def _for_home(card: RequestCard, block: Block) -> Block:
    """One card block as Home shows it: block ids prefixed with the ref; a file button
    (its modal belongs to a message) replaced by a pointer to the card."""
    block = dict(block)
    accessory = block.get("accessory")
    if isinstance(accessory, dict) and str(accessory.get("action_id", "")).startswith(
            FILE_ACTION_PREFIX):
        del block["accessory"]
        text = dict(block["text"])
        text["text"] = truncate(text["text"] + "\n_" + i18n.t("home.files_on_card") + "_", 3000)
        block["text"] = text
    if block.get("type") == "actions":  # "Edit and approve" opens its modal from the card
        block["elements"] = [e for e in block.get("elements") or [] if not str(
            e.get("action_id", "")).startswith(EDIT_ACTION_PREFIX)]
    if "block_id" in block:
        block["block_id"] = home_block_id(card.ref, str(block["block_id"]))
    return block


def home_block_id(ref: str, block_id: str) -> str:
    """``{ref}|{card block id}`` (card block ids fall back to ``v{n}:#{index}`` when
    long, so this stays within Slack's 255 characters for our 16-char refs)."""
    return f"{ref}{SEPARATOR}{block_id}"[:255]


def card_state(state_values: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """The Home view's ``state.values`` → the ones of ``ref``'s card, as the card's own
    message would carry them (prefix stripped; other requests' inputs dropped)."""
    prefix = f"{ref}{SEPARATOR}"
    return {bid[len(prefix):]: value for bid, value in state_values.items()
            if isinstance(bid, str) and bid.startswith(prefix)}


def _runs(runs: Sequence[RunLine]) -> list[Block]:
    blocks: list[Block] = [{"type": "divider"},
                           {"type": "header", "text": plain_text(i18n.t("home.runs"), 150)}]
    if not runs:
        return [*blocks, section(i18n.t("home.no_runs"))]
    lines = []
    for run in runs:
        state = i18n.t_or(f"run_status.{run.status}", run.status)
        line = (f"• *{slack_escape(truncate(run.agent, 100))}* — {slack_escape(state)} · "
                f"{i18n.format_when(run.started_at)}\n"
                f"   {slack_escape(truncate(' '.join(run.prompt.split()), 200))}")
        if run.waiting_on:
            line += "\n   " + i18n.t("home.waiting_on",
                                     what=slack_escape(truncate(run.waiting_on, 150)))
        lines.append(line)
    text = ""
    for line in lines:
        if len(text) + len(line) + 1 > 2900:
            break
        text += ("\n" if text else "") + line
    return [*blocks, section(text)]
