"""The console's side of approvals: more than five gates waiting is a numbered choice list."""

from __future__ import annotations

from tests.e2e.console.cli import BatonCli, run_ids


def test_six_waiting_gates_are_a_numbered_choice_list(baton: BatonCli) -> None:
    paused = [run_ids(baton.say(f'run gated "v{i}" --force')).pop() for i in range(6)]
    assert all(baton.run_record(r).status == "paused" for r in paused)

    (which,) = baton.say("lgtm", user="bob")

    assert which["kind"] == "which_gate" and which["buttons"] == []
    (menu,) = which["menus"]
    assert sorted(o["command"] for o in menu["options"]) == sorted(f"approve {r}" for r in paused)
    assert "6 runs wait for approval here" in which["text"]
    assert all(baton.run_record(r).status == "paused" for r in paused)

    done = baton.run("say", "--user", "bob", "--conversation", "ops", "--", "hmm")  # the text form
    assert done.returncode == 0, done.stderr
    assert "Approve which run?\n[1] gated " in done.stdout and "Reject which run?\n[7] gated " in done.stdout


def test_code_or_a_quote_never_approves_it_asks_back(baton: BatonCli) -> None:
    (run,) = run_ids(baton.say('run gated "v1"'))
    assert baton.run_record(run).status == "paused"

    for text in ("```lgtm```", "`approve`", "> lgtm", "```\nship it\n```"):
        (asked,) = baton.say(text, user="bob")
        assert asked["kind"] == "approval_question", (text, asked)
        assert "could not tell whether that approves the gate" in asked["text"]
        assert [b["command"] for b in asked["buttons"]] == [f"approve {run}", f"reject {run}"]
        assert baton.run_record(run).status == "paused"

    baton.say("lgtm", user="bob")  # the same words outside code decide
    assert baton.run_record(run).status == "completed"


def test_an_approval_taken_back_in_the_same_reply_asks_back(baton: BatonCli) -> None:
    (run,) = run_ids(baton.say('run gated "v1"'))

    for text in ("approve, nvm", "lgtm: oops, wrong run", "approve: just testing", "approve, my bad"):
        (asked,) = baton.say(text, user="bob")
        assert asked["kind"] == "approval_question", (text, asked)
        assert baton.run_record(run).status == "paused"

    baton.say("approve: fine", user="bob")
    assert baton.run_record(run).status == "completed"


def test_steps_after_a_waiting_gate_wait_and_a_rejection_says_so(baton: BatonCli) -> None:
    """`status` (and the run's story) of a paused run: the steps after its gate wait, they are
    not skipped. Rejected: the gate reads rejected, by whom and why, and the steps it skipped
    say so."""
    [run_id] = run_ids(baton.say('run gated "v1"'))
    (status,) = baton.say(f"status {run_id}")
    lines = status["text"].splitlines()
    assert any("[?] ship waiting · waits for `review`" in line for line in lines), status["text"]
    assert "skipped" not in status["text"]

    baton.say(f"reject {run_id} too risky", user="bob")
    (status,) = baton.say(f"status {run_id}")
    assert "[no] review rejected · rejected by bob: too risky" in status["text"], status["text"]
    assert "[-] ship skipped · skipped: `review` rejected" in status["text"]
    assert "review failed" not in status["text"]


def test_an_invalidated_gate_asks_again_and_never_re_uses_the_decision_it_dropped(baton: BatonCli) -> None:
    """`invalidate <run> <gate>` said the next resume runs the gate again, and `plan` said it
    would wait; the resume went through on the old approval (nobody approved that attempt)."""
    (baton.workflows / "recheck.yaml").write_text(
        "name: recheck\nnodes:\n  - {id: review, approval: Ship?}\n"
        "  - id: ship\n    depends_on: [review]\n    bash: test -f \"$BATON_WORKFLOW_DIR/ready\"\n"
    )
    (run_id,) = run_ids(baton.say("run recheck"))
    baton.say(f"approve {run_id}", user="bob")
    assert baton.run_record(run_id).status == "failed"  # `ship` found nothing ready
    (baton.workflows / "ready").write_text("now")
    baton.say(f"invalidate {run_id} review")
    assert "review waits — approval" in str(baton.say(f"plan {run_id}")[0]["text"])

    asked = baton.say(f"resume {run_id}")
    assert baton.run_record(run_id).status == "paused", asked  # asks again
    assert any("waits for approval at review" in str(r["text"]) for r in asked), asked
    baton.say(f"approve {run_id}", user="sue")
    assert baton.run_record(run_id).status == "completed"
    audit = str(baton.say(f"audit {run_id}")[0]["text"])
    assert "reopen_gate" in audit and "invalidated by" in audit


def test_a_gate_invalidated_while_it_waits_takes_the_one_approval_given_after(baton: BatonCli) -> None:
    """Nothing was decided when it was invalidated, so nothing is dropped: one approve opens it."""
    (baton.workflows / "waiting.yaml").write_text(
        "name: waiting\nnodes:\n  - {id: review, approval: Ship?}\n"
        "  - {id: ship, depends_on: [review], bash: echo ok}\n"
    )
    (run_id,) = run_ids(baton.say("run waiting"))
    baton.say(f"invalidate {run_id} review")
    status = str(baton.say(f"status {run_id}")[0]["text"])  # it was shown as skipped
    assert "review waiting · waiting for approval (ana invalidated it)" in status, status
    assert "ship waiting · waits for `review`" in status
    baton.say(f"approve {run_id}", user="bob")
    assert baton.run_record(run_id).status == "completed"


def test_approve_with_words_that_undercut_it_asks_back_and_a_short_word_names_no_run(baton: BatonCli) -> None:
    """`approve after the tests pass` is as unclear as its head form; `approve e9 is fine`
    (e9 the start of another conversation's run) decides no other run; an id followed by a
    colon names that run, never the gate that happens to wait here."""
    (here,) = run_ids(baton.say('run gated "here"', conversation="ops"))
    (there,) = run_ids(baton.say('run gated "there"', conversation="elsewhere"))

    for text in ("approve after the tests pass", "approve not yet, tests are red", "approve jk",
                 "approve if green", "/workflow approve once CI is green", "approve ... maybe"):
        (asked,) = baton.say(text, user="bob", conversation="ops")
        assert asked["kind"] == "approval_question", (text, asked)
    assert baton.run_record(here).status == baton.run_record(there).status == "paused"

    for short in (there[:1], there[:2], there[:3]):  # the start of a comment, not that run's id
        baton.say(f"approve {short} is fine, but not yet", user="bob", conversation="ops")
    assert baton.run_record(there).status == "paused"

    missing = next(p for p in ("aaaa", "bbbb", "cccc") if not here.startswith(p) and not there.startswith(p))
    (refused,) = baton.say(f"approve {missing}: looks good", user="bob", conversation="ops")
    assert refused["is_error"] and baton.run_record(here).status == "paused"  # no fallback to the gate here

    baton.say(f"approve {there}: looks good", user="bob", conversation="ops")
    assert baton.run_record(there).status == "completed"  # the run named, with its colon
    assert baton.run_record(here).status == "paused"


def test_a_replace_of_a_run_that_ended_meanwhile_offers_a_command_that_starts_one(baton: BatonCli) -> None:
    (old,) = run_ids(baton.say('run gated "v1"'))
    baton.say(f"abandon {old}")  # it ended before the replace came
    (refused,) = baton.say(f'run gated --replace {old} "v2"', wait=False)
    assert refused["is_error"] and "nothing was started" in refused["text"]
    offered = refused["text"].split("anyway: `/workflow ", 1)[1].split("`", 1)[0]
    assert "--replace" not in offered and "--force" in offered
    started = baton.say(offered, wait=False)  # the way on it names does start the run
    assert any(r["kind"] == "run_started" for r in started), started


def test_a_gate_closed_by_abandoning_its_run_is_not_a_rejection_by_anyone(baton: BatonCli) -> None:
    (run,) = run_ids(baton.say('run gated "v1"'))
    baton.say(f"abandon {run} not needed")  # ana abandons it: nobody rejected the gate

    (late,) = baton.say(f"approve {run}", user="bob", wait=False)
    (who,) = baton.say(f"who approved {run}", wait=False)

    assert late["is_error"] and "was closed undecided when ana cancelled the run" in late["text"]
    assert "rejected by" not in late["text"] and "rejected" not in who["text"]
    assert "closed undecided when ana cancelled the run" in who["text"]


def test_a_form_value_of_the_wrong_type_is_told_the_words_it_takes(baton: BatonCli) -> None:
    (baton.workflows / "flagged.yaml").write_text(
        'name: flagged\nnodes:\n  - id: review\n    approval:\n      question: "Go?"\n'
        "      form: {flag: {type: boolean, default: false}, n: {type: integer, default: 1}}\n")
    (run,) = run_ids(baton.say("run flagged"))
    (flag,) = baton.say(f"approve {run} flag=yes", user="bob", wait=False)
    (n,) = baton.say(f"approve {run} n=many", user="bob", wait=False)
    assert "Give `flag` as true or false, e.g. `approve <run> flag=true`." in flag["text"]
    assert "Give `n` as a whole number, e.g. `approve <run> n=3`." in n["text"]
    assert baton.run_record(run).status == "paused"
