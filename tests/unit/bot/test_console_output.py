"""Console output: JSON of `baton say --json`, numbered choices, the progress redrawn in place."""

from __future__ import annotations

import io
import json
from pathlib import Path

from adapters.console.interactive import ConsoleView
from adapters.console.output import replies_json, send
from core.commands.messages import Button, Reply
from core.delivery.envelope import Mode
from core.redaction import Redactor

PLAIN = Redactor(())  # these tests are about output; redaction has its own
NO_FILES = Path("/nonexistent/exports")  # no reply here carries a file: nothing is written

ERROR = Reply(
    kind="error", data={"message": "No workflow is named `flakey`.", "hint": "Try `flaky`."}, is_error=True
)
BUTTONS = (
    Button("Resume", "resume r_1", "primary", "resume"),
    Button("Abandon", "abandon r_1", None, "abandon"),
)


def progress(state: str) -> Reply:
    return Reply(
        kind="progress",
        data={
            "run_id": "r_1",
            "workflow": "flaky",
            "status": "running",
            "seconds": 1.0,
            "nodes": [
                {
                    "node_id": "check",
                    "kind": "bash",
                    "state": state,
                    "reason": "",
                    "error": "",
                    "seconds": 0.0,
                    "tokens": 0,
                    "tokens_saved": 0,
                },
            ],
        },
        run_id="r_1",
        run_status="running",
        how=Mode(replace_key="progress:r_1"),
    )


def test_json_carries_kind_rendered_text_run_buttons_and_error_flag() -> None:
    reply = Reply(
        kind="error", data=ERROR.data, buttons=BUTTONS, run_id="r_1", run_status="failed", is_error=True
    )

    (obj,) = json.loads(replies_json([reply], PLAIN, NO_FILES))

    assert obj["kind"] == "error"
    assert obj["text"] == "⚠️ No workflow is named `flakey`.\nTry `flaky`."
    assert (obj["run_id"], obj["run_status"], obj["is_error"]) == ("r_1", "failed", True)
    assert obj["buttons"][0]["label"] == "Resume"
    assert [b["command"] for b in obj["buttons"]] == ["resume r_1", "abandon r_1"]


def test_send_prints_buttons_as_numbered_choices() -> None:
    out = io.StringIO()
    send(Reply(kind="error", data=ERROR.data, buttons=BUTTONS), PLAIN, NO_FILES, out)
    lines = out.getvalue().splitlines()
    assert lines[-2:] == ["[1] Resume  /workflow resume r_1", "[2] Abandon  /workflow abandon r_1"]


def test_a_typed_number_stands_for_the_latest_buttons() -> None:
    view = ConsoleView(io.StringIO(), redraw=False, redactor=PLAIN, exports=NO_FILES)
    view.show(Reply(kind="error", data=ERROR.data, buttons=BUTTONS))

    assert view.choice("2") == BUTTONS[1]
    assert view.choice("3") is None
    assert view.choice("lgtm") is None


def test_progress_is_redrawn_in_place_on_a_terminal() -> None:
    out = io.StringIO()
    view = ConsoleView(out, redraw=True, redactor=PLAIN, exports=NO_FILES)
    view.show(progress("running"))
    first = out.getvalue()
    view.show(progress("done"))
    second = out.getvalue()[len(first) :]

    height = len(first.rstrip("\n").split("\n"))
    assert second.startswith(f"\x1b[{height}F\x1b[J")  # up over the old version, erase it
    assert "done" in second


def test_unchanged_progress_is_not_printed_again_and_changes_are_printed_without_a_terminal() -> None:
    out = io.StringIO()
    view = ConsoleView(out, redraw=False, redactor=PLAIN, exports=NO_FILES)
    view.show(progress("running"))
    view.show(progress("running"))
    once = out.getvalue()
    view.show(progress("done"))

    assert "\x1b[" not in out.getvalue()
    assert out.getvalue().startswith(once) and len(out.getvalue()) > len(once)
    assert out.getvalue().count("flaky") == 2


def test_user_input_is_never_redrawn_over() -> None:
    out = io.StringIO()
    view = ConsoleView(out, redraw=True, redactor=PLAIN, exports=NO_FILES)
    view.show(progress("running"))
    view.mark_input()
    view.show(progress("done"))
    assert "\x1b[" not in out.getvalue()


def _which(count: int) -> Reply:
    from core.commands import replies
    from tests.unit.commands.samples import make_gate, make_run

    runs = [make_run(id=f"r{i}", workflow="gated", platform="console") for i in range(count)]
    return replies.which_gate([(r, make_gate(r, created_at=float(i))) for i, r in enumerate(runs)], "approve")


def test_a_choice_list_is_numbered_and_a_number_picks_its_option() -> None:
    out = io.StringIO()
    view = ConsoleView(out, redraw=False, redactor=PLAIN, exports=NO_FILES)
    which = _which(7)
    assert which.buttons == () and len(which.menus) == 1

    view.show(which)

    assert "Approve which run?\n[1] gated r6 · review  /workflow approve r6" in out.getvalue()
    assert view.choice("7") == which.menus[0].options[6] and view.choice("8") is None
    (obj,) = json.loads(replies_json([which], PLAIN, NO_FILES))
    assert [o["command"] for o in obj["menus"][0]["options"]][:2] == ["approve r6", "approve r5"]


def test_once_the_gate_is_decided_its_numbers_are_gone() -> None:
    from core.commands.offers import withdrawn

    view = ConsoleView(io.StringIO(), redraw=False, redactor=PLAIN, exports=NO_FILES)
    which = Reply(kind="which_gate", data=_which(7).data, menus=_which(7).menus,
                  how=Mode(replace_key="offer:1"))
    view.show(which)
    settled = {"run_id": "r6", "workflow": "gated", "node": "review", "approved": True, "by": "console:ana",
               "how": "approve"}
    edited = withdrawn(which, "r6", settled)
    view.show(edited)
    assert [b.command for b in view.choices] == [f"approve r{i}" for i in range(5, -1, -1)]
    for run in ("r5", "r4", "r3", "r2", "r1", "r0"):
        edited = withdrawn(edited, run, {**settled, "run_id": run})
    view.show(edited)
    assert view.choices == ()
    never_shown = which.sent(replace_key="offer:2", edit_only=True)
    out = io.StringIO()
    ConsoleView(out, redraw=False, redactor=PLAIN, exports=NO_FILES).show(never_shown)
    assert out.getvalue() == ""  # an edit of a message this console never showed
    # ...unless it tells the gate's end: the message may be on the screen from before a restart
    ConsoleView(out, redraw=False, redactor=PLAIN, exports=NO_FILES).show(
        edited.sent(replace_key="offer:3")
    )
    assert "Approved by" in out.getvalue()
