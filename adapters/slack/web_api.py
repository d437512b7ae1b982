"""Calls to Slack's Web API with Slack's failure modes handled at the boundary.

- Retries are slack_sdk's own retry handlers, installed on the client (`with_retries`):
  `ratelimited` (HTTP 429) waits `Retry-After` (up to `MAX_ATTEMPTS` attempts, never a wait
  over `MAX_RETRY_WAIT`), a 500 / 502 / 503 / 504 backs off and tries again, and a dropped
  connection is tried once more (at least once: Slack may show a message twice, never none);
- `not_in_channel` / `channel_not_found`, `missing_scope` and the rest: logged (with the
  scope Slack says is needed) and raised as the core's `CallFailed`, whose
  message and hint are the one-line cause and next step a user can be shown;
- Slack unreachable after that (connection refused or dropped, DNS, timeout): `CallFailed` too.

Tokens never appear in logs: only the method, the Slack error code and the channel.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
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

from adapters.slack.formatting import FORMAT
from core.commands.lifecycle import stopped
from core.delivery.failures import CallFailed

log = logging.getLogger("baton.slack")

#: `auth.test` errors that mean the bot token itself is wrong: a configuration error, not an outage.
TOKEN_ERRORS = frozenset({"invalid_auth", "not_authed", "token_revoked", "token_expired",
                          "account_inactive", "no_permission", "org_login_required", "ekm_access_denied"})
MAX_ATTEMPTS = 4
MAX_RETRY_WAIT = 30.0
CHANNEL_ERRORS = frozenset({"not_in_channel", "channel_not_found", "is_archived"})


def _failed(exc: Exception, method: str, channel: str | None) -> CallFailed:
    """Slack's refusal (its error code, the scope it says is needed), or Slack unreachable (the
    exception's name), logged and translated."""
    where: dict[str, Any] = {"method": method, "channel": channel}
    if not isinstance(exc, SlackApiError):
        error = type(exc).__name__
        log.warning("slack %s failed: Slack could not be reached (%s)", method, error,
                    extra={"action": "slack_unreachable", "error": error, **where})
        return CallFailed(FORMAT.said("slack_unreachable", error), error=error, transient=True, **where)
    data = getattr(exc.response, "data", None)
    data = data if isinstance(data, Mapping) else {}
    error = str(data.get("error", "unknown_error"))
    in_channel = channel if error in CHANNEL_ERRORS else None
    shown = FORMAT.said("call_failed", error, in_channel, str(data.get("needed", "?")))
    log.warning("slack %s failed: %s", method, error, extra={"action": "slack_api_error", "error": error,
                                                           "needed_scope": data.get("needed"), **where})
    status = getattr(exc.response, "status_code", 200)
    transient = status == 429 or status >= 500 or error == "ratelimited"
    return CallFailed(shown, error=error, transient=transient, **where)


async def verify_token(client: AsyncWebClient) -> str:
    """`auth.test` before serving: the bot's user id. A token Slack refuses is a
    `ConfigurationError` (one line, exit 2: restarting cannot fix it); Slack unreachable stays a
    `CallFailed` (a restart may)."""
    try:
        response = await call(client, "auth.test")
    except CallFailed as exc:
        if exc.error in TOKEN_ERRORS:
            raise stopped(FORMAT, "token_refused", exc.error) from exc
        raise
    return str(response.get("user_id") or "")


async def display_names(client: AsyncWebClient, user: str) -> list[object]:
    """`users.info`'s names for `user`, best first (`core.delivery.names.Lookup`)."""
    found = (await call(client, "users.info", as_query=True, user=user)).get("user") or {}
    profile = found.get("profile") or {}
    return [profile.get("display_name"), profile.get("real_name"), found.get("real_name"), found.get("name")]


async def call(client: AsyncWebClient, method: str, *, as_query: bool = False,
               **kwargs: Any) -> AsyncSlackResponse:
    """`client.api_call(method, json=kwargs)`, retried by the client's handlers (`with_retries`);
    with `as_query`, a GET with the arguments as a query, booleans as Slack spells them (for the
    methods that take no JSON: `conversations.history`, `.replies`). `CallFailed` otherwise."""
    kwargs = {k: str(v).lower() if as_query and isinstance(v, bool) else v
              for k, v in kwargs.items() if v is not None}
    channel = kwargs.get("channel") or kwargs.get("channel_id")
    try:
        if as_query:
            return await client.api_call(method, http_verb="GET", params=kwargs)
        if method == "files.uploadV2":
            return await client.files_upload_v2(**kwargs)
        return await client.api_call(method, json=kwargs)
    except (aiohttp.ClientError, TimeoutError, OSError, SlackApiError) as exc:
        raise _failed(exc, method, channel) from exc


class _RateLimited(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 handler (waits `Retry-After`), refusing a wait over `MAX_RETRY_WAIT`."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        if response is None or response.status_code != 429:
            return False
        wait = next((v[0] for k, v in response.headers.items() if k.lower() == "retry-after"), "1")
        try:
            return float(wait) <= MAX_RETRY_WAIT
        except ValueError:
            return True


class _ServerError(AsyncServerErrorRetryHandler):
    """slack_sdk's 5xx handler, for every gateway error Slack answers (it knows 500 and 503)."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        return response is not None and response.status_code in (500, 502, 503, 504)


def with_retries(client: AsyncWebClient) -> AsyncWebClient:
    """`client` with slack_sdk's retry handlers for rate limits, 5xx and dropped connections."""
    client.retry_handlers = [
        AsyncConnectionErrorRetryHandler(max_retry_count=1),
        _RateLimited(max_retry_count=MAX_ATTEMPTS - 1),
        _ServerError(max_retry_count=MAX_ATTEMPTS - 1),
    ]
    return client
