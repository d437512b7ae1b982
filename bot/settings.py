"""Build `Settings` once, at the entry point, and turn a bad value into one line.

pydantic reports a wrong setting as a multi-line `ValidationError` keyed by field name;
an operator needs the *environment variable* and what is wrong with it:

    BATON_MAX_PARALLEL: Input should be greater than or equal to 1 (got '0')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from core.config import Settings
from core.errors import ConfigurationError

ENV_PREFIX = "BATON_"
#: Fields whose values are never echoed back, even when invalid.
_SECRET_FIELDS = frozenset(
    {"openai_api_key", "slack_bot_token", "slack_app_token", "slack_signing_secret", "discord_token",
     "web_secret"}
)
#: Flags that override a setting, by field name (for error messages).
_FLAG_NAMES = {"database_url": "--database-url", "workflow_dirs": "--workflows"}


def variable_name(field: str) -> str:
    """`max_parallel` -> `BATON_MAX_PARALLEL`."""
    return f"{ENV_PREFIX}{field.upper()}"


def _shown_input(field: str, value: Any) -> str:
    if field in _SECRET_FIELDS:
        return "'***'"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def describe_validation_error(exc: ValidationError, overridden: frozenset[str] = frozenset()) -> str:
    """One line naming each offending variable (or flag), what is wrong and the value given."""
    parts: list[str] = []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        field = loc[0] if loc else "?"
        name = _FLAG_NAMES[field] if field in overridden else variable_name(field)
        where = name + "".join(f".{p}" for p in loc[1:])
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        got = "" if error.get("type") == "missing" else f" (got {_shown_input(field, error.get('input'))})"
        parts.append(f"{where}: {message}{got}")
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
    if database_url is not None:
        values["database_url"] = database_url
    if workflow_dirs:
        values["workflow_dirs"] = [Path(d) for d in workflow_dirs]
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc, frozenset(values))) from exc
    except SettingsError as exc:
        field = _field_of_settings_error(exc)
        name = variable_name(field) if field else "BATON_* settings"
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        raise ConfigurationError(f"{name}: not valid JSON ({detail})") from exc
