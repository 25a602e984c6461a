"""Admin operations on API clients (``askhuman api-key``), one transaction each.

The engine stores what it is given: a key *hash* and an already encrypted webhook
secret (``bot.api.keys`` makes both), so no plaintext secret ever reaches here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from bot.engine.cards import to_db_time
from bot.engine.external import ApiClientInfo, client_info
from storage import ApiClient, Database


class ClientError(ValueError):
    """An admin mistake (duplicate or unknown name); the message says what to do."""


@dataclass(frozen=True)
class ClientRow:
    info: ApiClientInfo
    key_prefix: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    secret_rotated_at: dt.datetime | None


def _now() -> dt.datetime:
    return to_db_time(dt.datetime.now(dt.UTC))


def create(
    db: Database, name: str, key_hash: str, key_prefix: str, secret_enc: str,
    routes: Sequence[str], agents: Sequence[str], rate_limit: int,
) -> ApiClientInfo:
    with db.transaction() as session:
        if session.scalars(select(ApiClient).where(ApiClient.name == name)).first():
            raise ClientError(f"an API client named '{name}' already exists (revoked names "
                              "stay taken, for the audit); choose another name")
        row = ApiClient(name=name, key_hash=key_hash, key_prefix=key_prefix,
                        secret_enc=secret_enc, routes=list(routes), agents=list(agents),
                        rate_limit=rate_limit, created_at=_now())
        session.add(row)
        session.flush()
        return client_info(row)


def all_clients(db: Database) -> list[ClientRow]:
    with db.read() as session:
        rows = session.scalars(select(ApiClient).order_by(ApiClient.name)).all()
        return [ClientRow(client_info(r), r.key_prefix, r.created_at, r.revoked_at,
                          r.secret_rotated_at) for r in rows]


def _get(session: object, name: str) -> ApiClient:
    from sqlalchemy.orm import Session

    assert isinstance(session, Session)
    row = session.scalars(select(ApiClient).where(ApiClient.name == name)).first()
    if row is None:
        raise ClientError(f"no API client named '{name}' (see 'askhuman api-key list')")
    return row


def revoke(db: Database, name: str) -> bool:
    """Revoke ``name``'s key; False if it was already revoked."""
    with db.transaction() as session:
        row = _get(session, name)
        if row.revoked_at is not None:
            return False
        row.revoked_at = _now()
        return True


def rotate_secret(db: Database, name: str, secret_enc: str) -> None:
    """Replace the webhook secret; the old one keeps signing for the grace period."""
    with db.transaction() as session:
        row = _get(session, name)
        if row.revoked_at is not None:
            raise ClientError(f"API client '{name}' is revoked; create a new one instead")
        row.previous_secret_enc, row.secret_enc = row.secret_enc, secret_enc
        row.secret_rotated_at = _now()


def sealed_secret(db: Database, name: str) -> str:
    with db.read() as session:
        return _get(session, name).secret_enc
