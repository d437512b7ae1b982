"""Prompt providers: who answers a `prompt` step.

    ProviderRegistry.from_settings(settings).get(None)      # the default provider
        fake      deterministic and offline: examples and tests
        command   a CLI (`claude -p`, `llm -m gpt-4o`), prompt on stdin, answer on stdout
        openai    any OpenAI-compatible chat-completions endpoint (httpx; retries 429/5xx)

Every provider implements `Provider.complete(prompt, *, ctx, schema=None) -> Completion`.
`schema` is set when the step's output contract is JSON: providers ask for JSON of that
shape (the fake one produces it). Failures are `NodeFailed` with a next step.

`Provider.identity()` is what answers, as a small dict of non-secret fields (name, model,
base URL without credentials, a digest of the command): it is part of the cache key of every
prompt step the provider answers, so another model or command never serves an old answer.
A new option that changes answers belongs in its provider's `identity()`; a secret never does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from core.engine.nodes.process import exit_failure, run_process, timed_out
from core.errors import ConfigurationError, NodeFailed
from core.redaction import Redactor

if TYPE_CHECKING:  # httpx and tenacity are imported by OpenAIProvider only
    import httpx

    from core.config import Settings
    from core.engine.nodes import NodeContext


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0


class Provider(Protocol):
    name: str
    #: True when it runs a process that sees the step's environment (the workflow's `env:`)
    reads_env: bool

    def identity(self) -> dict[str, Any]:
        """What answers, for cache keys: `name` and the options that change answers; no secret."""
        ...

    async def complete(
        self, prompt: str, *, ctx: NodeContext, schema: Mapping[str, Any] | None = None
    ) -> Completion: ...


def public_url(url: str) -> str:
    """`url` without user, password, query or fragment: the part that may be shown and stored."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def json_instruction(schema: Mapping[str, Any]) -> str:
    """What real providers append to a prompt whose step wants JSON."""
    shape = json.dumps(schema, sort_keys=True) if schema else "any JSON value"
    return f"Answer with JSON only, no prose or code fences, matching this JSON Schema: {shape}"


class FakeProvider:
    """Same prompt, same answer; no network. Tokens are whitespace word counts."""

    name = "fake"
    reads_env = False

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    async def complete(
        self, prompt: str, *, ctx: NodeContext, schema: Mapping[str, Any] | None = None
    ) -> Completion:
        text = self.answer(prompt, schema)
        return Completion(text=text, tokens_in=len(prompt.split()), tokens_out=len(text.split()))

    @staticmethod
    def answer(prompt: str, schema: Mapping[str, Any] | None = None) -> str:
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8]
        gist = " ".join(prompt.split()[:12])
        text = f"fake answer {digest}: {gist}"
        if schema is None:
            return text
        value = _fake_value(schema, text, "value")
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _fake_value(schema: Mapping[str, Any], text: str, name: str) -> Any:
    """A value of the schema's (simple) type, derived from the prompt."""
    kind = schema.get("type", "object" if "required" in schema or "properties" in schema else "string")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties") or {}
        return {
            key: _fake_value(props.get(key) or {"type": "string"}, text, key)
            for key in schema.get("required", [])
        }
    simple: dict[str, Any] = {
        "integer": len(text.split()),
        "number": float(len(text.split())),
        "boolean": True,
        "null": None,
        "array": [],
    }
    return simple.get(kind, f"{name}: {text}")


class CommandProvider:
    """Runs a configured CLI without a shell: prompt on stdin, the answer is its stdout.

    The CLI reports no token usage, so tokens are 0. Timeout and cancellation behave as for
    `bash` steps (the whole process group is stopped).
    """

    name = "command"
    reads_env = True

    def __init__(self, argv: Sequence[str]) -> None:
        if not argv:
            raise ConfigurationError(
                "BATON_PROMPT_COMMAND is empty", hint="Set it to a CLI such as `claude -p` or `llm`."
            )
        self.argv = tuple(argv)

    @classmethod
    def parse(cls, command: str) -> CommandProvider:
        try:
            return cls(shlex.split(command))
        except ValueError as exc:
            raise ConfigurationError(
                f"BATON_PROMPT_COMMAND cannot be split into arguments: {exc}",
                hint="Fix its quoting, e.g. BATON_PROMPT_COMMAND='llm -m gpt-4o'.",
            ) from exc

    async def complete(
        self, prompt: str, *, ctx: NodeContext, schema: Mapping[str, Any] | None = None
    ) -> Completion:
        if schema is not None:
            prompt = f"{prompt}\n\n{json_instruction(schema)}"
        outcome = await run_process(self.argv, ctx, stdin=prompt.encode("utf-8"), what="prompt step")
        if outcome.returncode != 0:
            raise exit_failure(outcome, ctx, what=f"prompt command `{self.argv[0]}` for step")
        return Completion(text=outcome.stdout.decode("utf-8", errors="replace"))

    def identity(self) -> dict[str, Any]:
        """The program by name and the whole command as a digest: arguments may hold a token."""
        command = hashlib.sha256(json.dumps(self.argv).encode()).hexdigest()
        return {"name": self.name, "program": self.argv[0], "command": command}

    def __repr__(self) -> str:
        return f"CommandProvider({self.argv[0]!r})"


class _Retryable(Exception):
    """A 429/5xx answer or a dropped connection: worth another attempt."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class OpenAIProvider:
    """An OpenAI-compatible `POST {base_url}/chat/completions`.

    Records `usage.prompt_tokens` / `usage.completion_tokens`; retries 429, 5xx and connection
    errors `attempts` times with bounded exponential backoff; a 401/403 names
    BATON_OPENAI_API_KEY. The key is sent only in the Authorization header and never appears
    in a message, log line or `repr`.
    """

    name = "openai"
    reads_env = False

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        attempts: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._key = api_key
        self._hide = Redactor([api_key] if api_key else [])
        self.attempts = attempts
        self._backoff = (backoff, max_backoff)  # tenacity's wait is built at the first prompt

    def __repr__(self) -> str:
        return f"OpenAIProvider({self.url!r}, model={self.model!r})"

    def identity(self) -> dict[str, Any]:
        """Model and endpoint; never the key, nor credentials or a query in the URL."""
        base = self.url.removesuffix("/chat/completions")
        return {"name": self.name, "model": self.model, "base_url": public_url(base)}

    async def complete(
        self, prompt: str, *, ctx: NodeContext, schema: Mapping[str, Any] | None = None
    ) -> Completion:
        messages = [{"role": "user", "content": prompt}]
        if schema is not None:
            messages.insert(0, {"role": "system", "content": json_instruction(schema)})
        body = {"model": self.model, "messages": messages}
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        import httpx
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        backoff, max_backoff = self._backoff
        timer = asyncio.timeout(ctx.timeout)
        try:
            async with timer, httpx.AsyncClient(timeout=ctx.timeout) as client:
                retrying = AsyncRetrying(
                    stop=stop_after_attempt(self.attempts),
                    wait=wait_exponential_jitter(multiplier=backoff, max=max_backoff, jitter=backoff),
                    retry=retry_if_exception(lambda exc: isinstance(exc, _Retryable)),
                    reraise=True,
                )
                async for attempt in retrying:
                    with attempt:
                        data = await self._post(client, body, headers, ctx)
        except TimeoutError:
            if timer.expired():
                raise timed_out(ctx, "prompt step") from None
            raise
        except _Retryable as exc:
            raise NodeFailed(
                f"prompt step `{ctx.node_id}`: {self.url} {exc.what} after {self.attempts} attempts",
                node_id=ctx.node_id,
                hint="Check BATON_OPENAI_BASE_URL and that it is up, then resume the run.",
            ) from None
        return self._completion(data, ctx)

    async def _post(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str], ctx: NodeContext
    ) -> Any:
        import httpx

        try:
            response = await client.post(self.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Retryable("did not answer in time") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"could not be reached ({type(exc).__name__})") from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(f"answered HTTP {status}")
        if status in (401, 403):
            why = "refused the API key" if self._key else "wants an API key and none is set"
            raise NodeFailed(
                f"prompt step `{ctx.node_id}`: {self.url} {why} (HTTP {status})",
                node_id=ctx.node_id,
                hint="Set BATON_OPENAI_API_KEY to a valid key for that endpoint and restart Baton.",
            )
        if status >= 400:
            excerpt = self._hide.redact(ctx.redactor.redact(response.text[:200]))
            raise NodeFailed(
                f"prompt step `{ctx.node_id}`: {self.url} answered HTTP {status}: {excerpt}",
                node_id=ctx.node_id,
                hint="Check BATON_OPENAI_MODEL and BATON_OPENAI_BASE_URL.",
            )
        try:
            return response.json()
        except ValueError as exc:
            raise self._malformed(ctx, "is not JSON") from exc

    def _completion(self, data: Any, ctx: NodeContext) -> Completion:
        try:
            text = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise self._malformed(ctx, "has no choices[0].message.content") from None
        usage = data.get("usage") or {}
        return Completion(
            text=text if isinstance(text, str) else json.dumps(text),
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
        )

    def _malformed(self, ctx: NodeContext, what: str) -> NodeFailed:
        return NodeFailed(
            f"prompt step `{ctx.node_id}`: the answer of {self.url} {what}",
            node_id=ctx.node_id,
            hint="Point BATON_OPENAI_BASE_URL at an OpenAI-compatible endpoint (it ends in /v1).",
        )


class ProviderRegistry:
    """Providers by name, with a default for steps that name none."""

    def __init__(self, providers: Mapping[str, Provider], default: str) -> None:
        self._providers = dict(providers)
        self._identities: dict[str, dict[str, Any]] = {}  # name -> identity (providers do not change)
        if default not in self._providers:
            raise ConfigurationError(
                f"the default prompt provider `{default}` is not configured "
                f"(configured: {', '.join(sorted(self._providers))})",
                hint="Fix BATON_PROMPT_PROVIDER (fake, command or openai) and its settings.",
            )
        self.default = default

    @classmethod
    def from_settings(cls, settings: Settings) -> ProviderRegistry:
        providers: dict[str, Provider] = {"fake": FakeProvider()}
        if settings.prompt_command:
            providers["command"] = CommandProvider.parse(settings.prompt_command)
        elif settings.prompt_provider == "command":
            raise ConfigurationError(
                "BATON_PROMPT_PROVIDER is `command` but BATON_PROMPT_COMMAND is not set",
                hint="Set BATON_PROMPT_COMMAND to a CLI that reads the prompt on stdin, e.g. `claude -p`.",
            )
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        providers["openai"] = OpenAIProvider(
            base_url=settings.openai_base_url, model=settings.openai_model, api_key=key
        )
        return cls(providers, settings.prompt_provider)

    def get(self, name: str | None = None) -> Provider:
        key = self.default if name is None else name
        try:
            return self._providers[key]
        except KeyError:
            known = ", ".join(f"`{n}`" for n in sorted(self._providers))
            raise ConfigurationError(
                f"unknown prompt provider `{key}` (known: {known})",
                hint="Fix the step's `provider:`, or configure that provider (see docs/providers.md).",
            ) from None

    def names(self) -> list[str]:
        return sorted(self._providers)

    def identity(self, name: str | None = None) -> dict[str, Any]:
        """The identity of the provider that answers a step naming `name` (None: the default).
        A name nobody configured is keyed as such; the step fails when it runs. Shared: do not
        modify it."""
        key = self.default if name is None else name
        known = self._identities.get(key)
        if known is None:
            provider = self._providers.get(key)
            known = provider.identity() if provider is not None else {"name": key, "configured": False}
            self._identities[key] = known
        return known

    def reads_env(self, name: str | None = None) -> bool:
        """Whether the provider for `name` sees the step's environment (unknown: assume it does)."""
        provider = self._providers.get(self.default if name is None else name)
        return provider is None or provider.reads_env
