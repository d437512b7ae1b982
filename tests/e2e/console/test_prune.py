"""`baton prune` and `pin` through the real command line, on SQLite and PostgreSQL: a dry run
deletes nothing and counts; a prune takes finished runs with their history and leaves what
people still wait on (paused runs) and what they pinned; an old run id answers "pruned on …"."""

from __future__ import annotations

from core.store.records import RunStatus
from tests.e2e.console.cli import BatonCli, final_status, run_ids


def _started(baton: BatonCli, text: str) -> str:
    (run_id,) = run_ids(baton.say(text))
    return run_id


def test_prune_keeps_paused_and_pinned_runs_and_old_ids_answer_with_a_tombstone(
    baton_any_db: BatonCli,
) -> None:
    baton = baton_any_db
    done = _started(baton, 'run notes "v1"')
    pinned = _started(baton, 'run notes "v2" --force')
    paused = _started(baton, 'run gated "v3"')
    assert {r.id: r.status for r in baton.runs()}[paused] is RunStatus.PAUSED
    pin = baton.say(f"pin {pinned}")
    assert "is pinned" in pin[0]["text"]

    dry = baton.run("prune", "--dry-run", "--older-than", "0")
    assert dry.returncode == 0, dry.stderr
    assert "Would prune 1 finished run" in dry.stdout
    assert {r.id for r in baton.runs()} == {done, pinned, paused}  # a dry run deletes nothing

    runs_dir = baton.home / ".baton" / "runs"
    assert {p.name for p in runs_dir.iterdir()} == {done, pinned, paused}
    pruned = baton.run("prune", "--older-than", "0")
    assert pruned.returncode == 0, pruned.stderr
    assert "Pruned 1 finished run" in pruned.stdout and "; 1 run directories" in pruned.stdout
    assert {r.id for r in baton.runs()} == {pinned, paused}
    assert {p.name for p in runs_dir.iterdir()} == {pinned, paused}  # its files went with it

    (answer,) = baton.say(f"status {done}")
    assert answer["is_error"] and f"Run {done}" in answer["text"] and "was pruned on" in answer["text"]
    (prefix,) = baton.say(f"resume {done[:6]}")  # an old button's command, by prefix too
    assert "was pruned on" in prefix["text"]

    # the paused run still waits and can be approved; the pinned one keeps its history
    assert final_status(baton.say(f"approve {paused}")) == "completed"
    assert baton.say(f"status {pinned}")[0]["run_status"] == "completed"


def test_prune_without_a_retention_refuses_with_the_setting_to_use(baton: BatonCli) -> None:
    _started(baton, 'run notes "v1"')
    refused = baton.run("prune")
    assert refused.returncode == 2
    assert "BATON_RUN_RETENTION_DAYS is unset" in refused.stderr
    assert "--older-than" in refused.stderr
    assert len(baton.runs()) == 1


def test_the_retention_setting_prunes_only_runs_older_than_it(baton: BatonCli) -> None:
    _started(baton, 'run notes "v1"')
    baton.env_extra["BATON_RUN_RETENTION_DAYS"] = "1"
    kept = baton.run("prune")
    assert kept.returncode == 0 and "Pruned 0 finished runs" in kept.stdout
    assert len(baton.runs()) == 1
    baton.env_extra["BATON_RUN_RETENTION_DAYS"] = "zero"
    wrong = baton.run("prune")
    assert wrong.returncode == 2 and "BATON_RUN_RETENTION_DAYS" in wrong.stderr


def test_a_pruned_runs_directory_goes_without_following_what_its_steps_left(baton: BatonCli) -> None:
    outside = baton.home / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the run's")
    (baton.workflows / "litter.yaml").write_text(
        "name: litter\nnodes:\n  - id: a\n    bash: |\n"
        f"      ln -s {outside} linked-dir; ln -s {outside / 'keep.txt'} linked-file\n"
        "      mkdir -p locked/inner && touch locked/inner/f && chmod 000 locked/inner locked\n"
        "      seq 1 300000\n"  # a long output: its whole in .outputs/
    )
    baton.env_extra["BATON_MAX_OUTPUT_BYTES"] = "1000"
    (run_id,) = run_ids(baton.say("run litter"))
    run_dir = baton.home / ".baton" / "runs" / run_id
    assert (run_dir / ".outputs" / "a.1.log").stat().st_size > 1000

    pruned = baton.run("prune", "--older-than", "0")

    assert pruned.returncode == 0, pruned.stderr
    assert "Pruned 1 finished run" in pruned.stdout and "; 1 run directories" in pruned.stdout
    assert not run_dir.exists()
    assert (outside / "keep.txt").read_text() == "not the run's"  # the links went, not their targets
