"""Signed receipts for decided requests: proof that an action was really approved.

A receipt is ``ahr1.<payload>.<mac>`` (base64url): the payload names the request ref,
the decision, the deciders and a hash of the arguments that were shown (for a tool
approval, its binding: the tool name and canonical arguments); the MAC is HMAC-SHA256
over the payload with the key in ``ASKHUMAN_RECEIPT_KEY``, cut to 128 bits. A tool or
an auditor holding the key checks it with ``askhuman receipt verify``; changing any
byte, or signing with another key, makes it fail.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine.policy import approval_family
from storage import AuditLog, HumanRequest, Vote

GRANT_EVENTS = ("grant_created", "grant_used", "grant_revoked", "grant_expired")

KEY_ENV = "ASKHUMAN_RECEIPT_KEY"
PREFIX = "ahr1"
MAC_BYTES = 16


class ReceiptError(ValueError):
    """The receipt is malformed, or its signature does not match."""


def key_from_env(env: dict[str, str] | None = None) -> bytes | None:
    value = (env if env is not None else os.environ).get(KEY_ENV, "")
    return value.encode() if value else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def args_hash(request: HumanRequest) -> str:
    if request.binding:
        return str(request.binding)
    canonical = json.dumps(request.args, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def contents(request: HumanRequest, votes: Sequence[Vote]) -> dict[str, Any]:
    """What a receipt of ``request`` states (decided requests only)."""
    decision = request.status
    if request.status == "submitted":
        action = (request.result or {}).get("action") or {}
        decision = f"submitted:{action.get('id') or request.action_id}"
    deciders = sorted({f"{v.platform}:{v.user_id}" for v in votes
                       if request.action_id is None or approval_family(v.action_id)
                       == approval_family(request.action_id)})
    if not deciders and request.decided_by_user:
        deciders = [f"{request.decided_by_platform}:{request.decided_by_user}"]
    stated: dict[str, Any] = {"r": request.ref, "d": decision, "by": deciders,
                              "a": args_hash(request)[:32]}
    edit = (request.tool or {}).get("edit") if request.kind == "tool_approval" else None
    if isinstance(edit, dict) and edit.get("binding"):
        stated["e"] = str(edit["binding"])[:32]  # the call as an approver edited it
    return stated


def sign(payload: dict[str, Any], key: bytes) -> str:
    body = _b64(json.dumps(payload, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False).encode())
    mac = hmac.new(key, f"{PREFIX}.{body}".encode(), hashlib.sha256).digest()[:MAC_BYTES]
    return f"{PREFIX}.{body}.{_b64(mac)}"


def for_request(request: HumanRequest, votes: Sequence[Vote], key: bytes) -> str | None:
    """The receipt of a decided request (None while it is pending)."""
    if request.status == "pending":
        return None
    return sign(contents(request, votes), key)


@dataclass(frozen=True)
class Checked:
    ref: str
    decision: str
    deciders: list[str]
    args_hash: str
    edited_args_hash: str | None = None
    """The hash of the call as an approver edited it (None: not edited)."""


def verify(receipt: str, key: bytes) -> Checked:
    """The receipt's statement if its signature is good; ``ReceiptError`` otherwise."""
    parts = receipt.strip().split(".")
    if len(parts) != 3 or parts[0] != PREFIX:
        raise ReceiptError(f"not an askhuman receipt (expected {PREFIX}.<payload>.<mac>)")
    try:
        mac = _unb64(parts[2])
        payload = json.loads(_unb64(parts[1]))
    except (binascii.Error, ValueError):
        raise ReceiptError("the receipt is damaged (not base64url JSON)") from None
    good = hmac.new(key, f"{PREFIX}.{parts[1]}".encode(), hashlib.sha256).digest()[:MAC_BYTES]
    if not hmac.compare_digest(mac, good):
        raise ReceiptError("the signature does not match: the receipt was changed or "
                           "signed with another key")
    if not isinstance(payload, dict):
        raise ReceiptError("the receipt is damaged (payload is not an object)")
    return Checked(str(payload.get("r")), str(payload.get("d")),
                   [str(d) for d in payload.get("by") or []], str(payload.get("a")),
                   str(payload["e"]) if payload.get("e") else None)


def grant_events(session: Session, ref: str) -> list[dict[str, Any]]:
    """The standing-grant events of request ``ref`` from the audit log: the grant its
    decision created, or the grant that approved it (and what became of that grant)."""
    rows = list(session.scalars(select(AuditLog).where(
        AuditLog.request_ref == ref, AuditLog.event.in_(GRANT_EVENTS)).order_by(AuditLog.id)))
    used = {str((r.details or {}).get("granted_at")) for r in rows if r.event == "grant_used"}
    if used - {"None"}:  # approved by a grant: show how it was made, too
        rows += session.scalars(select(AuditLog).where(
            AuditLog.request_ref.in_(used), AuditLog.event == "grant_created"))
    return [{"event": r.event, "grant": (r.details or {}).get("grant"),
             "at": r.created_at.isoformat(), "actor": r.actor_user,
             "terms": _terms(r.details or {})} for r in rows]


def _terms(details: dict[str, Any]) -> str:
    if "expires_at" in details:
        return (f"{details.get('tool')} by {details.get('agent')}, at most "
                f"{details.get('max_uses')} uses until {details.get('expires_at')}, granted "
                f"by {details.get('granted_by')}")
    if "max_uses" in details:
        return f"use {details.get('uses')} of {details.get('max_uses')}"
    return str(details.get("why") or "")
