"""Build inbound Feishu events exactly as Feishu sends them, for tests.

HTTP callbacks are encrypted (AES-256-CBC, key = sha256(encrypt_key), random 16-byte
IV prefix, PKCS7 padding, base64 in ``{"encrypt": ...}``) and signed with
``X-Lark-Signature = sha256(timestamp + nonce + encrypt_key + body).hexdigest()``.
The long connection delivers the same JSON event, unencrypted and unsigned.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from Crypto.Cipher import AES


def encrypt(plaintext: bytes, encrypt_key: str, iv: bytes | None = None) -> str:
    """Feishu's callback encryption."""
    key = hashlib.sha256(encrypt_key.encode()).digest()
    iv = iv or os.urandom(16)
    pad = 16 - len(plaintext) % 16
    padded = plaintext + bytes([pad]) * pad
    return base64.b64encode(iv + AES.new(key, AES.MODE_CBC, iv).encrypt(padded)).decode()


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


@dataclass(frozen=True)
class SignedRequest:
    body: bytes
    headers: dict[str, str]
    timestamp: str
    nonce: str


def sign_event(
    payload: dict[str, Any],
    encrypt_key: str,
    *,
    timestamp: str | None = None,
    nonce: str | None = None,
    encrypted: bool = True,
) -> SignedRequest:
    """Encrypt (optionally) and sign ``payload`` like Feishu's HTTP callback push."""
    plaintext = json.dumps(payload, ensure_ascii=False).encode()
    body = (
        json.dumps({"encrypt": encrypt(plaintext, encrypt_key)}).encode()
        if encrypted
        else plaintext
    )
    ts = timestamp or str(int(time.time()))
    nonce = nonce or uuid.uuid4().hex[:16]
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": signature(ts, nonce, encrypt_key, body),
    }
    return SignedRequest(body=body, headers=headers, timestamp=ts, nonce=nonce)


def _header(event_type: str, token: str, app_id: str, event_id: str | None,
            create_time: str | None) -> dict[str, Any]:
    return {
        "event_id": event_id or uuid.uuid4().hex,
        "token": token,
        "create_time": create_time or str(int(time.time() * 1000)),
        "event_type": event_type,
        "tenant_key": "tenant_test",
        "app_id": app_id,
    }


def card_action_event(
    *,
    token: str,
    operator: str,
    value: dict[str, Any],
    form_value: dict[str, Any] | None = None,
    message_id: str = "om_unknown",
    chat_id: str = "oc_unknown",
    app_id: str = "cli_test_app",
    event_id: str | None = None,
    create_time: str | None = None,
    button_name: str = "b_0",
) -> dict[str, Any]:
    """A ``card.action.trigger`` (schema 2.0) for a form submit button."""
    action: dict[str, Any] = {"value": value, "tag": "button", "name": button_name}
    if form_value is not None:
        action["form_value"] = form_value
    return {
        "schema": "2.0",
        "header": _header("card.action.trigger", token, app_id, event_id, create_time),
        "event": {
            "operator": {"tenant_key": "tenant_test", "open_id": operator, "union_id": "on_x"},
            "token": "c-" + uuid.uuid4().hex,
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        },
    }


def message_event(
    *,
    token: str,
    sender: str,
    chat_id: str,
    message_id: str | None = None,
    text: str | None = None,
    file: dict[str, str] | None = None,
    chat_type: str = "group",
    mentions: list[dict[str, Any]] | None = None,
    parent_id: str | None = None,
    root_id: str | None = None,
    app_id: str = "cli_test_app",
    event_id: str | None = None,
    sender_type: str = "user",
) -> dict[str, Any]:
    """An ``im.message.receive_v1`` event: a text message, or a file (``file_key``...)."""
    if file is not None:
        message_type, content = "file", json.dumps(file)
    else:
        message_type, content = "text", json.dumps({"text": text or ""})
    message: dict[str, Any] = {
        "message_id": message_id or "om_user_" + uuid.uuid4().hex[:12],
        "create_time": str(int(time.time() * 1000)),
        "chat_id": chat_id,
        "chat_type": chat_type,
        "message_type": message_type,
        "content": content,
        "mentions": mentions or [],
    }
    if parent_id:
        message["parent_id"] = parent_id
    if root_id:
        message["root_id"] = root_id
    return {
        "schema": "2.0",
        "header": _header("im.message.receive_v1", token, app_id, event_id, None),
        "event": {
            "sender": {
                "sender_id": {"open_id": sender, "union_id": "on_" + sender, "user_id": None},
                "sender_type": sender_type,
                "tenant_key": "tenant_test",
            },
            "message": message,
        },
    }


def bot_mention(key: str = "@_user_1", name: str = "askhuman") -> dict[str, Any]:
    return {
        "key": key,
        "id": {"open_id": "ou_bot", "union_id": "on_bot"},
        "name": name,
        "tenant_key": "tenant_test",
    }
