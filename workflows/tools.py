"""Tools the example workflows call (`tool: post_release`, `tool: deploy_service`).

Loaded through BATON_TOOL_MODULES (default: `tools.py` in each workflow directory). Both are idempotent: a
re-run after a crash gets the same `idempotency_key` and returns the same result instead of
publishing or deploying twice. They touch nothing outside the process, so the examples run
on a bare machine.
"""

from __future__ import annotations

import hashlib

from core.engine.tools import tool


def _receipt(prefix: str, idempotency_key: str) -> str:
    return f"{prefix}-{hashlib.sha256(idempotency_key.encode('utf-8')).hexdigest()[:10]}"


@tool(replay="idempotent")
def post_release(*, title: str, body: str = "", version: str = "", idempotency_key: str) -> dict[str, str]:
    """Pretend to publish release notes; the receipt depends only on the idempotency key."""
    return {
        "published": title,
        "version": version,
        "receipt": _receipt("rel", idempotency_key),
        "chars": str(len(body)),
    }


@tool(replay="idempotent")
def deploy_service(
    *, service: str, version: str = "latest", environment: str = "staging", idempotency_key: str
) -> dict[str, str]:
    """Pretend to deploy; a retried call with the same key reports the same deployment."""
    if not service.strip():
        raise ValueError("service name is empty")
    return {
        "service": service,
        "version": version,
        "environment": environment,
        "deployment": _receipt("dep", idempotency_key),
        "status": "deployed",
    }
