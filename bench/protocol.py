"""How a benchmark child process reports back: one `BENCH_RESULT {json}` line on stdout.

Every measurement runs in a child process of its own (a fresh interpreter, a fresh
database), so peers never share a process with each other or with Baton, and a crash or
a hang of one side is reported for that side alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MARKER = "BENCH_RESULT "
ROOT = Path(__file__).resolve().parent.parent


class ChildFailed(RuntimeError):
    """A benchmark child exited without a result; `detail` holds its exact error."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}")
        self.what = what
        self.detail = detail


def emit(result: Mapping[str, Any]) -> None:
    """Called by a child: print its one result line."""
    sys.stdout.write(MARKER + json.dumps(dict(result), sort_keys=True) + "\n")
    sys.stdout.flush()


def parse(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            value: dict[str, Any] = json.loads(line[len(MARKER) :])
            return value
    return None


def error_tail(stderr: str, lines: int = 1) -> str:
    """The last meaningful line(s) of a child's stderr: usually the exception."""
    meaningful = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return " | ".join(meaningful[-lines:]) if meaningful else "(no output)"


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONHASHSEED", "0")
    env.update(extra or {})
    return env


def run_child(
    module: str,
    args: Sequence[str],
    *,
    what: str,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run `python -m module args…` and return its result; ChildFailed with the error otherwise."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env(env),
            cwd=cwd or ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ChildFailed(what, f"no result within {timeout:.0f} s") from exc
    result = parse(proc.stdout)
    if result is None:
        raise ChildFailed(what, f"exit {proc.returncode}: {error_tail(proc.stderr)}")
    return result
