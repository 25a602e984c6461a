"""Using a standing grant: a matching tool approval is created already approved.

Both doors that create tool approvals (embedded agents, ``bot.engine.approvals``; the
API and MCP, ``bot.engine.external``) call ``approve_by_grant`` in the transaction that
creates the request, before anything is delivered. A match (same agent, same tool,
the grant's scope; ``grant_rows.use``, a compare-and-set on the grant's uses) resolves
the request ``submitted`` with Approve, decided by the grant; ``store.resolve`` queues
the resume as for any decision (once the model step's last request is resolved). No
card is delivered; the run's thread gets one line saying which grant approved it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolResult
from bot.engine import grant_rows, outbox, policy, store
from bot.engine.cards import as_utc
from bot.engine.context import EngineContext
from bot.engine.grant_hook import GRANT_CALL
from bot.engine.ports import Identity
from bot.logs import scrub
from bot.tools.approval import APPROVE
from renderers.words import said
from storage import HumanRequest, Run


def grant_call(args: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The call as a grant sees it: the model's arguments with the admin's fixed ones."""
    return {**dict(args), **dict(fixed)}


def approve_by_grant(
    ctx: EngineContext, session: Session, now: dt.datetime, run: Run, request: HumanRequest,
    *, call: Mapping[str, Any], tell_thread: bool, resume: bool = True,
) -> grant_rows.Used | None:
    """Approve ``request`` by the newest active grant it matches (None: no grant did, so
    deliver the card). ``call``: the full arguments, fixed values included. ``resume``
    False: no resume job (the door settles its run in this transaction)."""
    tool = str((request.tool or {}).get("tool") or "")
    row = grant_rows.use(session, now, agent=run.agent, tool=tool, args=call,
                         binding=request.binding or "")
    if row is None:
        return None
    label = grant_rows.label(row.id)
    left = max(0, row.max_uses - row.uses)
    until = as_utc(row.expires_at)
    assert until is not None
    words = said("grant.used", grant=label, who=row.granted_by_name, left=left,
                 total=row.max_uses, until=f"{until:%Y-%m-%d %H:%M} UTC")
    who = Identity(grant_rows.PLATFORM, label, f"standing grant {label} from "
                   f"{row.granted_by_name}"[:200])
    result = AskHumanToolResult(status="submitted", message=str(words),
                                action=AskHumanSelectedAction(id=APPROVE, label="Approve"))
    if not store.resolve(session, now, request, result, who, resume=resume):
        raise RuntimeError("a new request was resolved before it was committed")
    store.audit(session, now, "grant_used", run_id=run.id, ref=request.ref, actor=who,
                details={"grant": label, "tool": tool, "uses": row.uses,
                         "max_uses": row.max_uses, "binding": request.binding,
                         "granted_at": row.request_ref})
    if tell_thread:
        rules = policy.of(request, ctx.settings)
        locale = rules.route.locale if rules is not None else None
        outbox.enqueue(session, now, ctx.outbox_hold(), "post_run_result", run_id=run.id,
                       platform=run.origin_platform,
                       payload={"text": scrub(words.text(locale)), "channel": run.origin_channel,
                                "thread": run.origin_thread})
    return row


def keep_call(request: HumanRequest, call: Mapping[str, Any]) -> None:
    """Keep the call's full arguments with a request whose card offers a grant (the
    card's copy of long values is cut; a grant's scope reads the real ones)."""
    tool = dict(request.tool or {})
    if tool.get("grant_offer") is not None:
        tool[GRANT_CALL] = dict(call)
        request.tool = tool
