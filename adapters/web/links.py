"""Signed, expiring links that act as one user: `/r/<token>` (a run) and `/c/<token>` (a
conversation's recent runs).

A token is an itsdangerous signature (HMAC-SHA256) over `{"u": user id, "r": run id, "x":
expiry}` (or `"p"`/`"c"`, platform and conversation, for a list), with a salt per kind so a
list token never opens a run. Nothing else is in the URL: the run, the user and the deadline
cannot be changed without breaking the signature. Every request re-checks that the user may
still view the run (`core.commands.authz`), so a link never outlives its user's access.

A link works for `BATON_WEB_LINK_TTL` seconds from when it was made, and never longer than
that from now (lowering the setting shortens links already given). A link made from another
one (a run listed on a list page) keeps the earlier deadline, so following links never
extends one.

The key (`core/signing_key.py`): derived from `BATON_WEB_SECRET` when set, otherwise
a random key in a 0600 file of the data directory; never in the database.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.commands.pages import PageLink
from core.store.records import Run

RUN, RUNS = "r", "c"  # the URL prefixes of the two kinds of page
_SALTS = {RUN: "baton.run-page.v1", RUNS: "baton.runs-page.v1"}


@dataclass(frozen=True, slots=True)
class Grant:
    """What a valid token allows: `uid` may look at one run, or at one conversation's runs."""

    uid: str
    expires_at: float
    run_id: str | None = None
    platform: str | None = None
    conversation: str | None = None


class LinkRefused(Exception):
    """A token that is not ours, was changed, or has expired (`expired` and, when the
    signature was good, the run it named so the page can say how to get a new one)."""

    def __init__(self, expired: bool, run_id: str | None = None) -> None:
        super().__init__("link expired" if expired else "link not valid")
        self.expired = expired
        self.run_id = run_id


class PageLinks:
    """Makes and checks page links (`core.commands.pages.RunPages`)."""

    def __init__(
        self, *, base_url: str, ttl: float, key: Callable[[], bytes], clock: Callable[[], float] = time.time
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.ttl = ttl
        self._key = key
        self._clock = clock
        self._serializers: dict[str, Any] = {}
        self._secret: bytes | None = None
        self._lock = threading.Lock()

    def secret(self) -> bytes:
        """The signing key (read or made once); other page secrets are derived from it."""
        with self._lock:
            if self._secret is None:
                self._secret = self._key()
            return self._secret

    def _serializer(self, kind: str) -> Any:
        key = self.secret()
        with self._lock:
            if not self._serializers:
                from itsdangerous import URLSafeSerializer

                self._serializers = {
                    k: URLSafeSerializer(key, salt=salt, signer_kwargs={"digest_method": hashlib.sha256})
                    for k, salt in _SALTS.items()
                }
            return self._serializers[kind]

    def _token(self, kind: str, claims: dict[str, Any]) -> str:
        token: str = self._serializer(kind).dumps(claims)
        return token

    # -- making --------------------------------------------------------------------------
    def _deadline(self) -> float:
        return float(int(self._clock() + self.ttl))

    def run_path(self, run_id: str, uid: str, expires_at: float) -> str:
        return f"/{RUN}/{self._token(RUN, {'u': uid, 'r': run_id, 'x': int(expires_at)})}"

    def runs_path(self, platform: str, conversation: str, uid: str, expires_at: float) -> str:
        claims = {"u": uid, "p": platform, "c": conversation, "x": int(expires_at)}
        return f"/{RUNS}/{self._token(RUNS, claims)}"

    def run_link(self, run: Run, uid: str) -> PageLink:
        deadline = self._deadline()
        return PageLink(self.base_url + self.run_path(run.id, uid, deadline), deadline, self.ttl)

    def runs_link(self, platform: str, conversation: str, uid: str) -> PageLink:
        deadline = self._deadline()
        path = self.runs_path(platform, conversation, uid, deadline)
        return PageLink(self.base_url + path, deadline, self.ttl)

    # -- checking ------------------------------------------------------------------------
    def verify(self, kind: str, token: str) -> Grant:
        """The grant `token` carries; `LinkRefused` when it is not valid or has expired."""
        from itsdangerous import BadSignature

        try:
            claims = self._serializer(kind).loads(token)
        except (BadSignature, UnicodeError, ValueError) as exc:
            raise LinkRefused(expired=False) from exc
        if not isinstance(claims, dict) or not isinstance(claims.get("u"), str):
            raise LinkRefused(expired=False)
        expires_at = claims.get("x")
        if not isinstance(expires_at, int):
            raise LinkRefused(expired=False)
        now = self._clock()
        run_id = claims.get("r") if isinstance(claims.get("r"), str) else None
        if not now < expires_at <= now + self.ttl + 1:
            raise LinkRefused(expired=True, run_id=run_id)
        if kind == RUN:
            if run_id is None:
                raise LinkRefused(expired=False)
            return Grant(uid=claims["u"], expires_at=float(expires_at), run_id=run_id)
        platform, conversation = claims.get("p"), claims.get("c")
        if not (isinstance(platform, str) and isinstance(conversation, str)):
            raise LinkRefused(expired=False)
        return Grant(uid=claims["u"], expires_at=float(expires_at), platform=platform,
                     conversation=conversation)
