"""The commands layer words the next step an engine or store error carries as data."""

from __future__ import annotations

import pytest

from core.commands.hints import hint
from core.errors import (
    AmbiguousRunId,
    BatonError,
    GateAlreadyDecided,
    Next,
    ReplayUnsafe,
    RunNotFound,
    RunNotResumable,
    UsageError,
)

RUN = "3f9a1c2b0d11"
WORDING = {
    Next.WATCH: f"Watch it with `/workflow status {RUN}` or stop it: `/workflow cancel {RUN}`.",
    Next.DECIDE: f"Decide it with `/workflow approve {RUN}` or `/workflow reject {RUN}`.",
    Next.RESUME: f"Use `/workflow resume {RUN}`.",
    Next.SEE: f"See `/workflow status {RUN}`.",
    Next.CHECK: f"Check `/workflow status {RUN}`.",
    Next.RECHECK: f"Check `/workflow status {RUN}` and try again if it still applies.",
    Next.FOLLOW: f"Follow it with `/workflow status {RUN}`.",
    Next.ABANDON: f"To drop it, use `/workflow abandon {RUN}`.",
    Next.RUN_AGAIN: "Start a new one with `/workflow run ship`.",
    Next.REUSE: f"Re-use its results in a new run: `/workflow run ship --resume-from {RUN}`.",
    Next.NEW_FROM: f"Start a new run from it: `/workflow run ship --resume-from {RUN}`.",
    Next.ATTENTION: f"See which step needs attention with `/workflow status {RUN}`.",
    Next.DECIDED: f"Nothing more to decide; follow it with `/workflow status {RUN}`.",
}


@pytest.mark.parametrize(("step", "line"), WORDING.items())
def test_each_next_step_is_worded_with_the_run_it_names(step: Next, line: str) -> None:
    error = RunNotResumable("no", run_id=RUN, status="failed", workflow="ship", next_step=step)
    assert hint(error) == line
    assert error.hint == ""  # the error itself carries data, not chat commands


def test_every_next_step_has_a_wording() -> None:
    assert set(WORDING) | {Next.RESOLVE, Next.LIST_RUNS} == set(Next)


def test_an_unsafe_step_is_settled_by_naming_it() -> None:
    error = ReplayUnsafe("may have run", node_id="send", run_id=RUN, status="needs_attention")
    assert hint(error) == f"Check what happened, then `/workflow resolve {RUN} send done|retry|fail`."


def test_a_gate_decided_before_says_follow_the_run() -> None:
    error = GateAlreadyDecided(run_id=RUN, node_id="legal", decision="approved", by="console:bo")
    assert hint(error) == WORDING[Next.DECIDED]


def test_an_engine_usage_error_gets_the_parsers_usage_line() -> None:
    error = UsageError("`maybe` is not a resolution", command="resolve")
    assert hint(error) == "Usage: /workflow resolve <run> <node> done|retry|fail [--output TEXT]"


def test_an_error_without_a_next_step_keeps_its_own_hint() -> None:
    assert hint(AmbiguousRunId("3f matches two")) == "Type more characters of the run id."
    assert hint(BatonError("boom", hint="Do this.")) == "Do this."
    assert hint(UsageError("bad", usage="/workflow run <workflow>")) == "Usage: /workflow run <workflow>"


def test_a_run_not_found_says_list_the_runs() -> None:
    missing = RunNotFound("No run has the id 42.", run_id="42")  # as the store raises it
    assert missing.next_step is Next.LIST_RUNS and not missing.hint
    assert hint(missing) == "Use `/workflow runs` to list recent runs."


def test_a_hint_the_commands_layer_wrote_wins_over_the_default_next_step() -> None:
    empty = RunNotFound("No runs here yet.", hint="Start one with `/workflow run <name>`.")
    assert hint(empty) == "Start one with `/workflow run <name>`."
