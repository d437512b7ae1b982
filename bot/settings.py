"""Build `Settings` once, at the entry point, and turn a bad value into one line.

pydantic reports a wrong setting as a multi-line `ValidationError` keyed by field name;
an operator needs the *environment variable* and what is wrong with it:

    BATON_MAX_PARALLEL: Input should be greater than or equal to 1 (got '0')

`BATON_ACCESS` decides who may do what, so each of its mistakes names the key and the fix on
that one line (`describe_access_error`):

    BATON_ACCESS: unknown key "runn" (did you mean "run"?); the keys are admins, groups, ...
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError
from pydantic_settings import SettingsError

from core.config import Settings
from core.errors import ConfigurationError

ENV_PREFIX = "BATON_"
#: Fields whose values are never echoed back, even when invalid.
_SECRET_FIELDS = frozenset(
    {"openai_api_key", "slack_bot_token", "slack_app_token", "slack_signing_secret", "discord_token",
     "web_secret", "mcp_tokens"}  # BATON_MCP_TOKENS: a token pasted where its hash belongs
)
#: Flags that override a setting, by field name (for error messages).
_FLAG_NAMES = {"database_url": "--database-url", "workflow_dirs": "--workflows"}


def variable_name(field: str) -> str:
    """`max_parallel` -> `BATON_MAX_PARALLEL`."""
    return f"{ENV_PREFIX}{field.upper()}"


def _shown_input(field: str, value: Any) -> str:
    if field in _SECRET_FIELDS:
        return "'***'"
    if field == "database_url" and isinstance(value, str) and "@" in value:
        value = "…@" + value.rsplit("@", 1)[1]  # never the password a URL may hold
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


_ACCESS_KEYS = ("admins", "groups", "people", "run", "approve", "approver_not_requester")
_ACCESS_EXAMPLE = '{"admins": ["slack:U024BE7LH"], "approve": {"*": ["group:sre"]}}'
_ACCESS_SHAPES = {
    "admins": 'a JSON list of user ids or groups, e.g. ["slack:U024BE7LH", "group:sre"]',
    "groups": 'an object of group name -> list of user ids, e.g. {"sre": ["slack:U024BE7LH"]}',
    "people": 'an object of person -> their ids, e.g. {"ana": ["slack:U024BE7LH", "discord:803511"]}',
    "run": 'an object of workflow name (or "*") -> list of user ids, e.g. {"deploy": ["group:sre"]}',
    "approve": 'an object of workflow name (or "*") -> list of user ids, e.g. {"*": ["group:sre"]}',
    "approver_not_requester": "true or false",
}


def describe_access_error(error: Mapping[str, Any]) -> str:
    """One `BATON_ACCESS` mistake: the key, what is wrong, the fix."""
    loc = [p for p in error.get("loc", ())[1:] if p != "[key]"]
    kind = str(error.get("type", ""))
    got = _shown_input("access", error.get("input"))
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), _ACCESS_KEYS, n=1)
        meant = f' (did you mean "{close[0]}"?)' if close else ""
        return f'{ENV_PREFIX}ACCESS: unknown key "{loc[-1]}"{meant}'
    where = f"{ENV_PREFIX}ACCESS" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    if kind == "model_type":
        what = "not valid JSON" if isinstance(error.get("input"), str) else "must be a JSON object"
        return f"{where}: {what}; write an object such as {_ACCESS_EXAMPLE} (got {got})"
    if kind.endswith(("list_type", "dict_type", "bool_type")) and len(loc) == 1:
        return f"{where}: must be {_ACCESS_SHAPES.get(loc[0], 'another shape')} (got {got})"
    if kind == "list_type":
        return f'{where}: must be a list of user ids such as ["slack:U024BE7LH"] (got {got})'
    if kind == "string_type":
        return f'{where}: must be a user id in quotes, such as "slack:U024BE7LH" (got {got})'
    return f"{where}: {str(error.get('msg', 'invalid value')).removeprefix('Value error, ')}"


def describe_validation_error(exc: ValidationError, overridden: frozenset[str] = frozenset()) -> str:
    """One line naming each offending variable (or flag), what is wrong and the value given."""
    parts: list[str] = []
    unknown_keys = False
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        field = loc[0] if loc else "?"
        if field == "access" and field not in overridden:
            parts.append(describe_access_error(error))
            unknown_keys = unknown_keys or error.get("type") == "extra_forbidden"
            continue
        name = _FLAG_NAMES[field] if field in overridden else variable_name(field)
        where = name + "".join(f".{p}" for p in loc[1:])
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        got = "" if error.get("type") == "missing" else f" (got {_shown_input(field, error.get('input'))})"
        parts.append(f"{where}: {message}{got}")
    if unknown_keys:
        parts.append(f"the keys of {ENV_PREFIX}ACCESS are {', '.join(_ACCESS_KEYS)}")
    return "; ".join(parts)


def _field_of_settings_error(exc: SettingsError) -> str | None:
    text = str(exc)
    marker = 'field "'
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split('"', 1)[0]


def load_settings(
    *,
    database_url: str | None = None,
    workflow_dirs: Sequence[Path] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Read `BATON_*` (and `.env`), apply command-line overrides, or raise one-line
    `ConfigurationError` naming the variable."""
    values: dict[str, Any] = dict(overrides or {})
    _no_duplicate_keys(f"{ENV_PREFIX}ACCESS")
    if database_url is not None:
        values["database_url"] = database_url
    if workflow_dirs:
        values["workflow_dirs"] = [Path(d) for d in workflow_dirs]
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        access_only = all(e.get("loc", ("",))[0] == "access" for e in exc.errors())
        message = describe_validation_error(exc, frozenset(values))
        # BATON_ACCESS's own line names the fix: nothing to add under it
        raise ConfigurationError(message, hint="" if access_only else None) from exc
    except SettingsError as exc:
        field = _field_of_settings_error(exc)
        name = variable_name(field) if field else "BATON_* settings"
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        if field == "access":  # one line with the fix, like its other mistakes
            raise ConfigurationError(
                f"{name}: not valid JSON ({detail}); write an object such as {_ACCESS_EXAMPLE}", hint=""
            ) from exc
        raise ConfigurationError(f"{name}: not valid JSON ({detail})") from exc
    if settings.access is None and _set_to_null(f"{ENV_PREFIX}ACCESS", settings):
        # pydantic-settings reads `null` as unset: that would let everyone in
        raise ConfigurationError(
            f"{ENV_PREFIX}ACCESS: null grants nothing; unset {ENV_PREFIX}ACCESS to let everyone run and "
            'approve, or grant by id: {"approve": {"*": ["slack:U024BE7LH"]}}', hint=""
        )
    return settings


def _set_to_null(name: str, settings: Settings) -> bool:
    """Whether variable `name` is set (in the environment or the `.env` file) to JSON null."""
    return any(value.strip() == "null" for value in _raw_values(name))


def _raw_values(name: str) -> list[str]:
    """The text variable `name` is set to, in the environment and in the `.env` file."""
    env_file = Settings.model_config.get("env_file")
    file_values = dotenv_values(env_file) if isinstance(env_file, str) and Path(env_file).is_file() else {}
    return [value for source in (os.environ, file_values) for key, value in source.items()
            if key.upper() == name and value is not None]


def _no_duplicate_keys(name: str) -> None:
    """JSON keeps the last of two equal keys without a word (`{"run": …, "run": …}` grants only
    the second): for a setting that decides who may do what, a duplicate stops Baton."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise ConfigurationError(
                    f'{name}: the key "{key}" appears twice in one object; write each key once '
                    "(merge their values), since JSON would silently keep only the last", hint=""
                )
            seen.add(key)
        return dict(items)

    for text in _raw_values(name):
        with contextlib.suppress(ValueError):  # not JSON: the settings' own parsing says so
            json.loads(text, object_pairs_hook=pairs)
