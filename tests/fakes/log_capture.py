"""Capture every log record of a served app, including uvicorn's and lark-oapi's.

pytest's ``caplog`` listens on the root logger only, and uvicorn's loggers do not
propagate there, so an "Exception in ASGI application" traceback would slip past it.
``captured_logs`` hangs one handler on the root logger *and* on ``uvicorn``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from bot.logs import JsonFormatter

_NON_PROPAGATING = ("uvicorn", "uvicorn.access")  # uvicorn.error propagates to uvicorn


class LogRecords(logging.Handler):
    """The records seen, plus checks tests need on them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self) -> list[str]:
        """Each record as ``serve`` would write it (JSON, with any traceback)."""
        formatter = JsonFormatter()
        return [formatter.format(record) for record in self.records]

    def tracebacks(self) -> list[str]:
        """Lines that carry a traceback (or were logged at ERROR and above)."""
        return [
            line for record, line in zip(self.records, self.lines(), strict=True)
            if record.exc_info or "Traceback" in line or record.levelno >= logging.ERROR
        ]

    def messages(self, logger_prefix: str = "") -> list[str]:
        return [r.getMessage() for r in self.records if r.name.startswith(logger_prefix)]

    def clear(self) -> None:
        self.records.clear()


@contextmanager
def captured_logs() -> Iterator[LogRecords]:
    handler = LogRecords()
    root = logging.getLogger()
    loggers = [root] + [logging.getLogger(n) for n in _NON_PROPAGATING]
    level = root.level
    root.setLevel(logging.INFO)  # our loggers inherit it: "card delivered" is INFO
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        root.setLevel(level)
