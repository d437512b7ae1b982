"""A cheap pure tool for the run-page benchmark's large runs (loaded by path, once per process)."""

from core.engine.tools import tool


@tool("bench_ping", replay="pure", inline=True)
def bench_ping() -> str:
    return "pong"
