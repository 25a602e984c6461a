"""The Slack Web API client with retries, and one way to turn its errors into text.

Every outbound call goes through one ``AsyncWebClient`` whose slack-sdk retry
handlers absorb transient trouble: 429 (sleeping for ``Retry-After``), 5xx and
dropped connections. Anything still failing after that is permanent for our
purposes, and callers map it to ``DeliveryError`` or a log line.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import metrics
from bot.platforms.slack.config import SlackConfig

DEFAULT_TIMEOUT_SECONDS = 30
SDK_LOGGER = "slack_sdk.web.async_base_client"
"""The logger slack-sdk's ``AsyncWebClient`` uses unless it is given one."""


class EffectiveLevelLogger(logging.LoggerAdapter[logging.Logger]):
    """slack-sdk's logger, whose ``level`` is the level in effect.

    slack-sdk guards its per-request debug lines with ``logger.level <= DEBUG``, and
    ``level`` is NOTSET (0) on a logger nobody set a level on, so it formats a dump of
    every request and response (the whole card) even when nothing logs DEBUG
    (slackapi/python-slack-sdk#1957): 15 % of a ``chat.update``'s instructions. Through
    this adapter the guard asks the effective level, so the lines are built exactly
    when they would be written, and go to the same logger as before.
    """

    @property
    def level(self) -> int:
        return self.logger.getEffectiveLevel()


class AnyServerErrorRetryHandler(AsyncServerErrorRetryHandler):
    """slack-sdk's handler only retries 500 and 503; gateways also say 502 and 504."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and 500 <= response.status_code < 600


def retry_handlers(
    *, rate_limit_retries: int = 3, server_error_retries: int = 3, connection_retries: int = 2
) -> list[AsyncRetryHandler]:
    """The retry policy for every Web API call (slack-sdk handlers, tuned counts)."""
    return [
        AsyncConnectionErrorRetryHandler(max_retry_count=connection_retries),
        AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries),
        AnyServerErrorRetryHandler(max_retry_count=server_error_retries),
    ]


class PooledWebClient(AsyncWebClient):
    """An ``AsyncWebClient`` that keeps one aiohttp session (and its keep-alive
    connections) per event loop.

    Without a session slack-sdk opens a new session, so a new TCP and TLS connection,
    for every call. A session is bound to the loop it was made in, so a client used
    from another loop (tests, ``asyncio.run`` in a command) gets its own.
    """

    _session_loop: asyncio.AbstractEventLoop | None = None

    async def _request(  # type: ignore[no-untyped-def]
        self, *, http_verb, api_url, req_args
    ) -> dict[str, Any]:
        self._ensure_session()
        return await super()._request(
            http_verb=http_verb, api_url=api_url, req_args=req_args
        )

    def _ensure_session(self) -> None:
        loop = asyncio.get_running_loop()
        session = self.session
        if session is not None and not session.closed and self._session_loop is loop:
            return
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            connector=aiohttp.TCPConnector(limit=100, ttl_dns_cache=300),
            cookie_jar=aiohttp.DummyCookieJar(),  # the Web API sets no cookies we need
        )
        self._session_loop = loop

    async def aclose(self) -> None:
        """Close the session of the running loop (at shutdown); later calls reopen one."""
        session = self.session
        if session is not None and self._session_loop is asyncio.get_running_loop():
            self.session = None
            await session.close()


class MeteredWebClient(PooledWebClient):
    """``AsyncWebClient`` that counts every call by method and outcome (``/metrics``)."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            response = await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            metrics.platform_call("slack", api_method, error_code(exc))
            raise
        except Exception as exc:
            metrics.platform_call("slack", api_method, type(exc).__name__)
            raise
        metrics.platform_call("slack", api_method, "ok")
        return response


def _counted(handler: AsyncRetryHandler) -> AsyncRetryHandler:
    """Count the retries ``handler`` decides on, by API method."""
    prepare = handler.prepare_for_next_attempt_async

    async def counted(**kwargs: Any) -> None:
        request = kwargs.get("request")
        method = str(getattr(request, "url", "")).rstrip("/").rsplit("/", 1)[-1] or "unknown"
        metrics.platform_retry("slack", method)
        await prepare(**kwargs)

    handler.prepare_for_next_attempt_async = counted  # type: ignore[method-assign]
    return handler


def make_client(config: SlackConfig, *, timeout: int = DEFAULT_TIMEOUT_SECONDS) -> AsyncWebClient:
    """Build the bot-token client; ``SLACK_API_URL`` redirects it (tests, proxies)."""
    return MeteredWebClient(
        token=config.bot_token,
        base_url=config.api_url or AsyncWebClient.BASE_URL,
        timeout=timeout,
        retry_handlers=[_counted(handler) for handler in retry_handlers()],
        logger=cast(logging.Logger, EffectiveLevelLogger(logging.getLogger(SDK_LOGGER))),
    )


def error_code(exc: BaseException) -> str:
    """A short, secret-free description of a failed call (Slack's error code if any)."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        data = getattr(response, "data", None)
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
        return f"http_{getattr(response, 'status_code', 'error')}"
    if isinstance(exc, SlackClientError):
        return type(exc).__name__
    return type(exc).__name__
