"""A cheap pure tool for large test runs (loaded once per process through BATON_TOOL_MODULES)."""

from core.engine.tools import tool


@tool("page_ping", replay="pure", inline=True)
def page_ping() -> str:
    return "pong"
