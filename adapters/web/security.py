"""Security headers on every response, and the CSRF check of the page's forms.

Headers: a strict Content-Security-Policy (scripts and styles from this origin only, no
inline script, not framable), `Cache-Control: no-store` (a signed page is never kept by a
browser or proxy), `Referrer-Policy: no-referrer` (page URLs carry tokens) and their kin.

CSRF: a POST needs (1) the `baton_csrf` cookie, a random value set by the page with
SameSite=Strict (another site's form never sends it), (2) the form's `csrf` field, an HMAC
over that cookie value, the page's link token and the form's own id, and (3) when the
browser says where the request came from (`Sec-Fetch-Site`, `Origin`), this origin. (Under
`no-referrer` a browser sends `Origin: null` with a form; then `Sec-Fetch-Site` must say
same-origin.)
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store, max-age=0",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
COOKIE = "baton_csrf"


class SecurityHeaders:
    """ASGI middleware: `HEADERS` on every HTTP response, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


class Csrf:
    def __init__(self, key: Callable[[], bytes], *, secure: bool, public_origin: str) -> None:
        self._key = key
        self.secure = secure  # the cookie is `Secure` when pages are served over https
        self.public_origin = public_origin  # BATON_PUBLIC_URL's scheme://host[:port]

    @staticmethod
    def new_cookie() -> str:
        return secrets.token_urlsafe(24)

    @staticmethod
    def new_form_id() -> str:
        return secrets.token_urlsafe(12)

    def field(self, cookie: str, link_token: str, form_id: str) -> str:
        message = f"csrf\x00{cookie}\x00{link_token}\x00{form_id}".encode()
        return hmac.new(self._key(), message, hashlib.sha256).hexdigest()

    def check(self, request: Request, link_token: str, form_id: str, field: str) -> bool:
        cookie = request.cookies.get(COOKIE, "")
        if not cookie or not form_id or not field:
            return False
        if not hmac.compare_digest(self.field(cookie, link_token, form_id), field):
            return False
        return self.same_origin(request)

    def same_origin(self, request: Request) -> bool:
        """False when the browser says the request came from another site."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("origin")
        if origin is None:  # not sent: the cookie and the HMAC decide
            return True
        if origin == "null":  # what browsers send under `Referrer-Policy: no-referrer`
            return site == "same-origin"
        return origin == self.public_origin or origin.split("://", 1)[-1] == request.headers.get("host")
