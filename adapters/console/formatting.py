"""How the console shows a reply: `templates/console/`, plain text, no limit, no escaping. It is
also the default format: a platform with none of its own (an agent through MCP, the run pages'
answers) is shown in it. Registered with `core.render` on import (and named in `pyproject.toml`
under `baton.formats`, as `console` and as `default`)."""

from __future__ import annotations

from core.render import Format, register

FORMAT = register(Format(name="console", templates="console"), default=True)
