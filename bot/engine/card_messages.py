"""``CardMessages``: which request a card's message is a card of, remembered per process.

A platform whose clicks name the message they came from
(``ClickTraits.clicks_name_their_message``) has the engine refuse a click whose
message is not a card of the request it claims (``ClickCheck`` before it is stored,
``ClickInbox`` when deciding). A message stays the card of the one request it was
posted for, so once found it is remembered: in a race of 100 approvers on one card
the 99 losers no longer read it again (a statement each, ~0.2 ms). A message not
found is asked again every time (its card may still be being posted) and never kept,
so made-up message ids in signed callbacks cannot fill the memory or push cards out.

Per process, bounded (``MESSAGES_KEPT``, oldest forgotten first); another replica
finds the message itself.
"""

from __future__ import annotations

import threading

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from storage import Delivery, HumanRequest

MESSAGES_KEPT = 4096
"""Cards' messages one process remembers."""

_DELIVERED_AS = (
    select(HumanRequest.ref, Delivery.target_kind)
    .join(Delivery, Delivery.request_id == HumanRequest.id)
    .where(Delivery.platform == bindparam("platform"),
           Delivery.message_id == bindparam("message_id")))
"""Built once: the request (and the kind of target) a message was delivered for."""

Card = tuple[str, str]
"""(the request's ref, the delivery's ``target_kind``: a channel, or a person's DM)."""


class CardMessages:
    """(platform, message id) → ``Card``, read from ``deliveries`` once per process."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Card] = {}
        self._lock = threading.Lock()  # reads run on the loop and on worker threads

    def known(self, platform: str, message_id: str) -> Card | None:
        """The remembered card, without reading (None: not known here yet)."""
        return self._known.get((platform, message_id))

    def read(self, session: Session, platform: str, message_id: str) -> Card | None:
        """The card ``message_id`` is (in ``session``'s transaction); None when no card
        was recorded as that message."""
        key = (platform, message_id)
        found = self._known.get(key)
        if found is not None:
            return found
        row = session.execute(_DELIVERED_AS, {"platform": platform,
                                              "message_id": message_id}).first()
        if row is None:
            return None
        found = (str(row[0]), str(row[1]))
        with self._lock:
            if len(self._known) >= MESSAGES_KEPT:
                del self._known[next(iter(self._known))]  # the oldest
            self._known[key] = found
        return found
