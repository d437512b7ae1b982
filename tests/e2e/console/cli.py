"""Drive the real `baton` command as a subprocess, on a temporary database and workflow dir."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.store.records import Run
from core.store.repository import SqlStore
from tests.e2e.zygote import run_baton

FIXTURE_WORKFLOWS = Path(__file__).parent / "workflows"
REPO = Path(__file__).resolve().parents[3]
#: One `baton say` (start, migrate, run to rest) must finish well within this.
CALL_TIMEOUT = 60.0


def baton_env(database_url: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `baton` subprocess: no BATON_* from the caller's shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=database_url,
        BATON_WORKFLOW_DIRS=str(home / "workflows"),
        BATON_DATA_DIR=str(home / ".baton"),
        BATON_PROMPT_PROVIDER="fake",
        BATON_LOG_LEVEL="WARNING",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


@dataclass
class BatonCli:
    home: Path  # the subprocess's working directory; holds `workflows/` and `.baton/`
    database_url: str
    env_extra: dict[str, str] = field(default_factory=dict)
    cold: bool = False  # every call a new interpreter, not a fork (tests/e2e/zygote.py)

    @classmethod
    def create(cls, home: Path, database_url: str) -> BatonCli:
        shutil.copytree(FIXTURE_WORKFLOWS, home / "workflows")
        return cls(home=home, database_url=database_url)

    @property
    def workflows(self) -> Path:
        return self.home / "workflows"

    def env(self) -> dict[str, str]:
        return baton_env(self.database_url, self.home, **self.env_extra)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`baton <args>`; waits for the process to finish (a process forked from one that
        imported Baton already: tests/e2e/zygote.py)."""
        return run_baton(args, cwd=self.home, env=self.env(), timeout=CALL_TIMEOUT, cold=self.cold)

    def say(
        self,
        text: str,
        *,
        user: str = "ana",
        conversation: str = "ops",
        thread: str | None = None,
        wait: bool = True,
        event_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """`baton say --json …`; the parsed replies (the call must succeed)."""
        args = ["say", "--json", "--conversation", conversation, "--user", user]
        args += ["--thread", thread] if thread else []
        args += ["--wait"] if wait else []
        args += ["--event-id", event_id] if event_id else []
        done = self.run(*args, "--", text)
        assert done.returncode == 0, f"baton say {text!r} exited {done.returncode}:\n{done.stderr}"
        replies = json.loads(done.stdout)
        assert isinstance(replies, list)
        return replies

    # -- looking at the database the subprocesses wrote ---------------------------------
    def runs(self) -> list[Run]:
        store = SqlStore(self.database_url)
        try:
            return store.runs.recent_runs(limit=1000)
        finally:
            store.close()

    def run_record(self, run_id: str) -> Run:
        store = SqlStore(self.database_url)
        try:
            return store.runs.get_run(run_id)
        finally:
            store.close()

    def args_of(self, run: Run) -> dict[str, Any]:
        store = SqlStore(self.database_url)
        try:
            args: dict[str, Any] = json.loads(store.blobs.get_blob(run.args_digest))
            return args
        finally:
            store.close()


# -- reading replies ---------------------------------------------------------------------


def final_status(replies: list[dict[str, Any]]) -> str | None:
    """The resting status `--wait` ends with."""
    return replies[-1]["run_status"] if replies else None


def run_ids(replies: list[dict[str, Any]]) -> set[str]:
    return {r["run_id"] for r in replies if r["run_id"]}


def prompts(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fresh-run prompts: the replies offering `--force` as one of their buttons."""
    return [r for r in replies if any("--force" in b["command"] for b in r["buttons"])]


def button(reply: dict[str, Any], startswith: str) -> dict[str, Any]:
    matches = [b for b in reply["buttons"] if b["command"].startswith(startswith)]
    assert len(matches) == 1, f"one button running {startswith!r} expected in {reply['buttons']}"
    return matches[0]
