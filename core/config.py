"""Baton's settings, read from `BATON_*` environment variables (and `.env`).

Only the entry point (`bot/`) builds a `Settings`; everything else receives the values
it needs. A wrong value fails at start with one line naming the variable
(`bot.main.load_settings`).
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# how `BATON_ACCESS` names people, agents and groups (also read here by the commands layer)
from core.principals import AGENT_NAME, AGENT_PREFIX, ANYONE, GROUP_NAME, GROUP_PREFIX, PERSON_PREFIX, USER_ID
from core.workflows.limits import LoadLimits
from core.workflows.render_budget import RenderLimits


def url_passwords(url: str) -> list[str]:
    """The password in `scheme://user:password@host/…` as written and percent-decoded."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return sorted({password, unquote(password)}) if password else []


def _split_list(value: Any) -> Any:
    """Accept a JSON list, or a comma/`os.pathsep` separated string."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        seps = [",", os.pathsep]
        for sep in seps:
            text = text.replace(sep, "\x00")
        return [part.strip() for part in text.split("\x00") if part.strip()]
    return value


_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
WORKFLOW_KEY = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9_.-]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an environment variable's name
_ID_FORMS = "write slack:U… / discord:<digits> / console:<name> / mcp:<agent>"


def _user(value: str) -> str:
    if not USER_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a user id; {_ID_FORMS} (the id, never a display name)")
    return value


def _grantee(value: str) -> str:
    """A user id, `group:<name>` or `*` (anyone)."""
    if value == ANYONE or value.startswith(GROUP_PREFIX):
        if value != ANYONE and not GROUP_NAME.fullmatch(value.removeprefix(GROUP_PREFIX)):
            raise ValueError(f"{value!r} is not a group name; use lower-case letters, digits, - and _")
        return value
    if not USER_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a user id; {_ID_FORMS}, group:<name> or *")
    return value


def _person(value: str) -> str:
    """A user id or `group:<name>` (admins: never `*`)."""
    if value == ANYONE:
        raise ValueError('"*" cannot be an admin; list the admins by id or group:<name>')
    return _grantee(value)


def _group_name(value: str) -> str:
    if not GROUP_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a group name; use lower-case letters, digits, - and _")
    return value


def _workflow_key(value: str) -> str:
    if not WORKFLOW_KEY.fullmatch(value):
        raise ValueError(f"{value!r} is not a workflow name; use the workflow's `name:` or *")
    return value


UserId = Annotated[str, AfterValidator(_user)]
Grantee = Annotated[str, AfterValidator(_grantee)]
Person = Annotated[str, AfterValidator(_person)]
GroupName = Annotated[str, AfterValidator(_group_name)]
WorkflowKey = Annotated[str, AfterValidator(_workflow_key)]


class Access(BaseModel):
    """Who may do what (`BATON_ACCESS`), by immutable user id qualified with the platform
    (`slack:U024BE7LH`, `discord:80351110224678912`, `console:ana`), `group:<name>` or `*`.

    `run` and `approve` map a workflow name (or `*`) to who may run it / decide its gates;
    `groups` names sets of user ids; `people` names one person's ids on several platforms
    (`"ana": ["slack:U024BE7LH", "discord:80351…"]`), so that a quorum, a repeated vote and the
    four-eyes rule count that person once whichever account they use. It fails closed: what
    it does not grant is refused to everyone but the admins, so `Access()` grants nothing (a
    missing `approve` means only admins approve). Only when `BATON_ACCESS` is unset does Baton
    use `Access.everyone()`. Unknown keys, malformed ids, references to undefined groups and an
    account in two people are errors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    admins: list[Person] = Field(default_factory=list)
    groups: dict[GroupName, list[UserId]] = Field(default_factory=dict)
    people: dict[GroupName, list[UserId]] = Field(default_factory=dict)
    run: dict[WorkflowKey, list[Grantee]] = Field(default_factory=dict)
    approve: dict[WorkflowKey, list[Grantee]] = Field(default_factory=dict)
    #: the run's requester may not decide its gates (admins included: four eyes)
    approver_not_requester: bool = False

    @model_validator(mode="after")
    def _groups_exist(self) -> Access:
        for where, ids in self._references():
            for ref in ids:
                name = ref.removeprefix(GROUP_PREFIX)
                if ref.startswith(GROUP_PREFIX) and name not in self.groups:
                    known = ", ".join(sorted(self.groups)) or "none defined"
                    raise ValueError(
                        f"{where} names {ref!r}, which is not in groups ({known}); "
                        f'define it: "groups": {{"{name}": ["slack:U…"]}}'
                    )
        return self

    @model_validator(mode="after")
    def _one_person_per_account(self) -> Access:
        owner: dict[str, str] = {}
        for name, ids in self.people.items():
            for uid in ids:
                if uid.startswith(AGENT_PREFIX):
                    raise ValueError(f"people.{name} lists {uid!r}: an agent is nobody's account; "
                                     "remove it (agents are granted by their own id)")
                if uid in owner and owner[uid] != name:
                    raise ValueError(f"{uid!r} is in people.{owner[uid]} and people.{name}; "
                                     "an account belongs to one person: keep it in one")
                owner[uid] = name
        return self

    def accounts(self) -> dict[str, str]:
        """Each id `people` lists -> `person:<name>`: who it is, whichever account they use."""
        return {uid: PERSON_PREFIX + name for name, ids in self.people.items() for uid in ids}

    def person(self, uid: str) -> str:
        """`person:<name>` for an id `people` lists, else the id itself."""
        return self.accounts().get(uid, uid)

    def _references(self) -> list[tuple[str, list[str]]]:
        refs: list[tuple[str, list[str]]] = [("admins", self.admins)]
        refs += [(f"run.{w}", ids) for w, ids in self.run.items()]
        refs += [(f"approve.{w}", ids) for w, ids in self.approve.items()]
        return refs

    @classmethod
    def everyone(cls) -> Access:
        """What Baton does without `BATON_ACCESS`: everyone may run and approve everything."""
        return cls(run={ANYONE: [ANYONE]}, approve={ANYONE: [ANYONE]})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BATON_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # storage and discovery
    database_url: str = "sqlite:///./.baton/baton.db"
    workflow_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=lambda: [Path("workflows")])
    data_dir: Path = Path(".baton")  # run working directories, artifacts
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # engine
    max_parallel: int = Field(default=4, ge=1, le=256)
    lease_seconds: float = Field(default=15.0, gt=0)
    group_commit_ms: float = Field(default=10.0, ge=0, le=1000)  # pure results' commit window
    replica_id: str = Field(default_factory=socket.gethostname)
    # python module names or .py paths (relative to a workflow directory or its parent) whose
    # @tool functions are registered; `tools.py`: each workflow directory's own, where there is one
    tool_modules: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["tools.py"])
    executor: Literal["local", "procrastinate"] = "local"
    # scale-out (docs/operations.md): graceful shutdown and distributed workers
    shutdown_grace: float = Field(default=10.0, ge=0)  # seconds in-flight steps get on SIGTERM
    queue_name: str = "baton"  # the Procrastinate queue node jobs go to
    worker_concurrency: int = Field(default=4, ge=1, le=256)  # steps one `baton worker` runs at once
    worker_heartbeat_seconds: float = Field(default=2.0, gt=0)  # a worker silent 3x this is dead
    # `baton run` (chat platforms) and `baton worker` under bot/supervisor.py, which restarts a
    # dead child itself; off by default: systemd or Kubernetes should see a crash (`--supervise`)
    supervise: bool = False
    # retired (#27): /healthz and /readyz are served on BATON_WEB_PORT (bot/http.py); a value is refused
    health_port: Any = None
    health_host: Any = None
    # housekeeping (bot/housekeeping.py): a pass at start, then every `housekeeping_minutes`
    housekeeping_minutes: float = Field(default=60.0, gt=0)
    # gate deadlines (bot/deadline_loop.py): how often due reminders, escalations and timeouts are fired
    deadline_poll_seconds: float = Field(default=5.0, gt=0, le=3600)
    # schedules (bot/schedule_loop.py): the longest a loop sleeps between two ticks (it wakes at
    # the soonest due time anyway); schedules another replica added are seen within this
    schedule_poll_seconds: float = Field(default=5.0, gt=0, le=3600)
    # chat event ids kept for dedupe: well above Slack's retries (minutes) and the 60 s claim
    event_retention_hours: float = Field(default=24.0, ge=1)
    state_retention_days: float = Field(default=30.0, gt=0)  # adapters' values (progress message ids)
    # the durable outbox (core/delivery/outbox.py): how often due replies (retries, a dead or
    # stopped replica's) are looked for, and how long delivered ones are kept
    outbox_poll_seconds: float = Field(default=2.0, gt=0, le=3600)
    # the longest one reply's send may take; the claim on it is shorter (core/delivery/outbox.py,
    # CLAIM_SECONDS) and renewed while the send lasts, so a killed replica's reply waits at most
    # that (a stopped one releases its claims, a restarted one its dead predecessor's, at once)
    outbox_lease_seconds: float = Field(default=60.0, gt=0, le=3600)
    outbox_retention_days: float = Field(default=7.0, gt=0)
    # retention (bot/retention.py, `baton prune`): finished runs last changed longer ago than
    # this are pruned with their history (unset or `keep`: never); the audit trail on its own
    # clock; how many runs one transaction deletes (a short hold of the write lock)
    run_retention_days: float | None = Field(default=None, gt=0)
    audit_retention_days: float | None = Field(default=None, gt=0)
    # a pure step's cached result last used longer ago than this is computed again ("cache entry
    # expired"; core/engine/cache_expiry.py); unsafe and idempotent results never expire
    cache_retention_days: float | None = Field(default=None, gt=0)
    prune_batch: int = Field(default=100, ge=1, le=10_000)
    # notices (core/commands/notices.py): a subscription's flood of notices to one conversation
    # becomes one notice, then one digest per this many seconds (a `notify:` rule's `digest:` wins)
    notify_digest_seconds: float = Field(default=600.0, gt=0, le=30 * 86400)
    # a run waiting in its concurrency queue this many seconds is told as `queued_long` (once per
    # run per time it is queued; core/commands/queue_watch.py, checked on the deadline loop's pace)
    queued_long_after: float = Field(default=1800.0, gt=0, le=30 * 86400)
    # a chat event claimed but never finished (its replica died) is handled again when the
    # platform redelivers it this many seconds after the claim (docs/operations.md)
    event_stale_seconds: float = Field(default=60.0, gt=0)

    # limits on what a workflow file or step may take (README "Settings", docs/workflows.md)
    workflow_max_bytes: int = Field(default=1_000_000, ge=1_000)  # larger workflow files are refused
    yaml_max_alias_nodes: int = Field(default=10_000, ge=0)  # nodes YAML aliases may add to a file
    max_step_timeout: float = Field(default=86_400.0, gt=0, allow_inf_nan=False)  # largest `timeout:`
    render_timeout: float = Field(default=2.0, gt=0, le=600, allow_inf_nan=False)  # seconds per render
    render_max_bytes: int = Field(default=1_000_000, ge=1_000)  # characters one render may produce
    max_output_bytes: int = Field(default=1_000_000, ge=1_000)  # a step's kept output; the rest in a file
    max_output_file_bytes: int = Field(default=100_000_000, ge=1_000)  # of that file: a runaway step
    max_artifact_bytes: int = Field(default=100_000_000, ge=0)  # one step's artifacts, kept in the store

    # prompt providers
    prompt_provider: Literal["fake", "command", "openai"] = "fake"
    prompt_command: str | None = None  # e.g. "claude -p" / "llm -m gpt-4o"; prompt on stdin
    openai_base_url: str = "https://api.openai.com/v1"
    openai_model: str = "gpt-4o-mini"
    openai_api_key: SecretStr | None = None

    # access control: None (BATON_ACCESS unset) lets everyone run and approve
    access: Access | None = None

    # step secrets (docs/workflows.md "Environment and secrets"): NAME=value lines whose values
    # the workflows' `secrets:` may declare (Baton's environment is looked at first)
    secrets_file: Path | None = None
    # the sandbox every step process runs in (core/engine/sandbox.py, docs/operations.md):
    # auto = bubblewrap when it works (checked once at start), bwrap = it must, none = no sandbox
    step_sandbox: Literal["auto", "bwrap", "none"] = "auto"
    step_user: str = "nobody"  # who steps run as when Baton runs as root (a name or uid[:gid])
    #: bytes each of a sandboxed step's /tmp, /dev/shm and $HOME may hold (memory: a tmpfs)
    step_tmp_bytes: int = Field(default=1 << 30, ge=1 << 20)
    #: processes (threads included) a sandboxed step may have at once: a fork bomb stops there
    step_max_processes: int = Field(default=4096, ge=64)
    #: names of Baton's environment variables that are step secrets too (`secrets:` may name
    #: them); no other variable of Baton's environment ever reaches a step
    step_secrets: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # Slack
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None  # set: Socket Mode
    slack_signing_secret: SecretStr | None = None  # set without app token: HTTP mode
    # retired (#27): Slack's HTTP mode is served at /slack/events on BATON_WEB_PORT; a value is refused
    slack_port: Any = None
    #: Slack's Web API base URL: another host for GovSlack or a Slack-compatible deployment
    slack_api_url: str = "https://slack.com/api/"

    # Discord
    discord_token: SecretStr | None = None
    discord_guild_id: int | None = None
    #: Discord's HTTP API base URL (a proxy, or the tests' local fake); unset: discord.com's
    discord_api_url: str | None = None

    # the process's one HTTP server (bot/http.py): the run pages (adapters/web), `/mcp`, Slack's
    # HTTP mode (`/slack/events`), `/healthz` and `/readyz`; 0 or `off`: none of them
    web_port: int = Field(default=8080, ge=0, le=65535)
    web_host: str = "127.0.0.1"
    #: bytes of a request body that server reads at most (413 past them): `/slack/events` faces
    #: the internet, and Bolt reads a body whole before it checks the signature
    http_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)
    #: the run pages on that server (and the Open run links in chat); off: the rest is still served
    pages: bool = True
    #: the address chat links carry (a proxy in front of Baton); default http://<host>:<port>
    public_url: str | None = None
    #: signs page links; unset: a random key kept in the database, shared by every replica
    web_secret: SecretStr | None = None
    web_link_ttl: float = Field(default=12 * 3600, gt=0, le=30 * 86400)  # seconds a link works
    web_poll_ms: float = Field(default=500, ge=50, le=10_000)  # how often open pages read the store

    # agents through MCP (adapters/mcp, docs/agents.md)
    #: who `baton mcp` (stdio) acts as; granted in BATON_ACCESS like a person
    mcp_principal: str = "mcp:local"
    #: `/mcp` of `baton run`'s web app: sha256 (hex) of each bearer token -> the agent's name
    #: (principal `mcp:<name>`); unset: `/mcp` is not served
    mcp_tokens: dict[str, str] = Field(default_factory=dict)
    #: where runs an agent starts report (`slack:C024BE7LH`, `discord:<channel>`, `console:<name>`);
    #: unset: nowhere people see them (the agent reads them through its tools)
    mcp_post_to: str | None = None

    @field_validator("max_output_file_bytes")
    @classmethod
    def _file_holds_the_kept_output(cls, value: int, info: ValidationInfo) -> int:
        kept = info.data.get("max_output_bytes")
        if kept is not None and value < kept:
            raise ValueError(f"must be at least BATON_MAX_OUTPUT_BYTES ({kept:,}): the file starts with it")
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        """A URL of SQLite or PostgreSQL, refused here in one line rather than as a traceback
        from whichever part opens it first. Read without SQLAlchemy (`baton health` never
        imports it); `core.store.database.normalize_url` checks the rest when it is opened."""
        scheme, sep, rest = value.strip().partition("://")
        backend = scheme.split("+", 1)[0].lower()
        fix = "use sqlite:///path/to/baton.db (four slashes for an absolute path) or postgresql://user@host/db"
        if not sep or not _URL_SCHEME.fullmatch(scheme):
            raise ValueError(f"is not a database URL; {fix}")
        if backend not in ("sqlite", "postgres", "postgresql"):
            raise ValueError(f"uses {backend!r}; Baton stores runs in SQLite or PostgreSQL; {fix}")
        host = rest.split("/", 1)[0]
        if backend == "sqlite" and host:
            raise ValueError(
                f"names a host ({host.rsplit('@', 1)[-1]!r}), which SQLite has none of; write three "
                "slashes before a relative path (sqlite:///baton.db), four before an absolute one "
                "(sqlite:////srv/baton/baton.db)"
            )
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _slack_api_url(cls, value: str) -> str:
        url = value.strip()
        if not url.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// address, like https://slack.com/api/")
        return url if url.endswith("/") else url + "/"

    @field_validator("mcp_principal")
    @classmethod
    def _mcp_principal(cls, value: str) -> str:
        name = value.strip().removeprefix(AGENT_PREFIX)
        if not AGENT_NAME.fullmatch(name):
            raise ValueError("must be mcp:<name> (letters, digits, '.', '_' and '-'), like mcp:ci-agent")
        return AGENT_PREFIX + name

    @field_validator("mcp_tokens")
    @classmethod
    def _mcp_tokens(cls, value: dict[str, str]) -> dict[str, str]:
        tokens: dict[str, str] = {}
        for digest, name in value.items():
            if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                raise ValueError(
                    "a key is not a sha256 hex digest; map each token's `printf %s TOKEN | sha256sum` "
                    "to a name, never the token itself"
                )
            bare = name.removeprefix(AGENT_PREFIX)
            if not AGENT_NAME.fullmatch(bare):
                raise ValueError(f"{name!r} is not an agent name; use letters, digits, '.', '_' and '-'")
            tokens[digest.lower()] = bare
        return tokens

    @field_validator("mcp_post_to")
    @classmethod
    def _mcp_post_to(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        platform, _, conversation = value.strip().partition(":")
        if platform not in ("slack", "discord", "console") or not conversation:
            raise ValueError("must be <platform>:<conversation>, like slack:C024BE7LH or discord:<channel>")
        return value.strip()

    @property
    def agents(self) -> frozenset[str]:
        """The agents configured now (`mcp:<name>` of each token, and the stdio one): an agent
        dropped from BATON_MCP_TOKENS is revoked, its page links too (adapters/web)."""
        return frozenset({self.mcp_principal, *(AGENT_PREFIX + name for name in self.mcp_tokens.values())})

    @property
    def mcp_enabled(self) -> bool:
        """`/mcp` is served by `baton run` (beside the run pages) when tokens are configured."""
        return bool(self.mcp_tokens)

    @field_validator("web_port", mode="before")
    @classmethod
    def _web_port(cls, value: Any) -> Any:
        return 0 if isinstance(value, str) and value.strip().lower() in ("off", "false", "no", "") else value

    @property
    def cache_retention(self) -> float | None:
        """`cache_retention_days` in seconds (None: cached results never expire)."""
        return None if self.cache_retention_days is None else self.cache_retention_days * 86_400.0

    @field_validator("run_retention_days", "audit_retention_days", "cache_retention_days", mode="before")
    @classmethod
    def _keep(cls, value: Any) -> Any:
        keep = isinstance(value, str) and value.strip().lower() in ("keep", "off", "never", "")
        return None if keep else value

    @field_validator("health_port", "health_host", "slack_port", mode="before")
    @classmethod
    def _retired(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if info.field_name == "slack_port":
            raise ValueError("no longer read: Slack's HTTP mode is served at /slack/events on "
                             "BATON_WEB_PORT, with the run pages and health; set that instead and unset this")
        raise ValueError("no longer read: /healthz and /readyz are served on BATON_WEB_PORT "
                         "(BATON_WEB_HOST), with the run pages; set those instead and unset this")

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        url = value.strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or "?" in url or "#" in url:
            raise ValueError("must be an http:// or https:// address without a query, like https://baton.example.com")
        return url

    @property
    def http_enabled(self) -> bool:
        """The process serves HTTP (bot/http.py) on BATON_WEB_HOST:BATON_WEB_PORT."""
        return self.web_port != 0

    @property
    def web_enabled(self) -> bool:
        """The run pages are served, and chat offers links to them."""
        return self.http_enabled and self.pages

    @property
    def slack_http(self) -> bool:
        """Slack in HTTP mode (a signing secret, no app-level token): events at /slack/events."""
        return self.slack_enabled and self.slack_app_token is None

    @property
    def page_base_url(self) -> str:
        """Where links to run pages point: BATON_PUBLIC_URL, else the address served."""
        if self.public_url is not None:
            return self.public_url
        host = "127.0.0.1" if self.web_host in ("0.0.0.0", "::", "") else self.web_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.web_port}"

    @field_validator("workflow_dirs", "tool_modules", "step_secrets", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("step_secrets")
    @classmethod
    def _step_secrets(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _VARIABLE.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; list names such as NPM_TOKEN")
            if name.upper().startswith("BATON_"):
                raise ValueError(f"{name!r} is one of Baton's own settings, never a step secret")
        return list(dict.fromkeys(value))

    @property
    def slack_enabled(self) -> bool:
        return self.slack_bot_token is not None and (
            self.slack_app_token is not None or self.slack_signing_secret is not None
        )

    @property
    def discord_enabled(self) -> bool:
        return self.discord_token is not None

    @property
    def access_policy(self) -> Access:
        """`BATON_ACCESS`, or when it is unset, everyone may run and approve."""
        return self.access if self.access is not None else Access.everyone()

    def load_limits(self) -> LoadLimits:
        return LoadLimits(self.workflow_max_bytes, self.yaml_max_alias_nodes, self.max_step_timeout)

    def render_limits(self) -> RenderLimits:
        return RenderLimits(seconds=self.render_timeout, max_chars=self.render_max_bytes)

    def secrets(self) -> list[str]:
        """Every secret value of the settings, for redaction: the tokens and keys, and the
        passwords in the database and OpenAI URLs."""
        values = [
            self.openai_api_key,
            self.slack_bot_token,
            self.slack_app_token,
            self.slack_signing_secret,
            self.discord_token,
            self.web_secret,
        ]
        found = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
        return found + url_passwords(self.database_url) + url_passwords(self.openai_base_url)
