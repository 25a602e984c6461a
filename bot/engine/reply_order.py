"""Card updates that must wait for a click's own reply (a platform's declared trait).

On some platforms (Feishu) a card patch shows only after the click's reply was sent,
and the adapter holds the patch until then. A decision made from such a click must
not await its own card update, or the reply would wait for the hold's timeout. The
``ClickInbox`` marks the decision's context (``deciding_for``); the ``Outbox`` reads it
(``cards_after_reply``) and sends that one update in the background. A context
variable, not an engine-wide switch: clicks from other platforms are not affected.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_AFTER_REPLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "askhuman_cards_after_reply", default=False)
"""True while deciding a click whose platform shows card patches only after the click's
own reply (``ClickTraits.updates_cards_after_reply``): the ``Outbox`` then sends that
decision's card update in the background instead of inside the decision."""


def cards_after_reply() -> bool:
    """Whether the decision being committed came from such a click (see above)."""
    return _AFTER_REPLY.get()


@contextlib.contextmanager
def deciding_for(after_reply: bool) -> Iterator[None]:
    token = _AFTER_REPLY.set(after_reply)
    try:
        yield
    finally:
        _AFTER_REPLY.reset(token)
