"""`BATON_CACHE_RETENTION_DAYS` through the real `baton say`, as a user would: a run fails, its
cached results age past the retention, and its resume computes the expired pure step again and
says why ("cache entry expired", in `plan` before and in `status` after), while the unsafe
step's result, and the pure result it was computed from, are kept: its side effect fires once.

The retention is set to two seconds (a fraction of a day) and the test waits them out; each
step appends a line to a marker file, so what ran is counted from outside the process."""

from __future__ import annotations

import time
from pathlib import Path

from tests.e2e.console.cli import BatonCli, final_status, run_ids

RETENTION_DAYS = 2 / 86_400  # two seconds

AGING = """\
name: aging
nodes:
  - id: base
    bash: echo base >> {mark}/base.log; echo base-out
    replay: pure
  - id: notify
    depends_on: [base]
    bash: echo sent >> {mark}/notify.log; echo sent
    replay: unsafe
  - id: stamp
    bash: echo stamp >> {mark}/stamp.log; echo stamp-out
    replay: pure
  - id: check
    depends_on: [stamp, notify]
    bash: test -f {mark}/fixed && echo checked
    replay: pure
"""


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _rows(text: str) -> dict[str, str]:
    """node -> its line in a `plan` or `status` reply (`[>] stamp runs — cache entry expired`)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        words = line.replace("`", " ").split()
        for node in ("base", "notify", "stamp", "check"):
            if node in words[:3]:
                rows.setdefault(node, line)
    return rows


def test_a_resume_recomputes_an_expired_pure_step_and_keeps_the_unsafe_result(
    baton: BatonCli, tmp_path: Path
) -> None:
    mark = tmp_path / "marks"
    mark.mkdir()
    (baton.workflows / "aging.yaml").write_text(AGING.format(mark=mark))
    baton.env_extra.update(BATON_STEP_SANDBOX="none", BATON_CACHE_RETENTION_DAYS=str(RETENTION_DAYS))

    first = baton.say('run aging "go"')
    (run_id,) = run_ids(first)
    assert final_status(first) == "failed"
    assert [_count(mark / f"{n}.log") for n in ("base", "notify", "stamp")] == [1, 1, 1]

    time.sleep(RETENTION_DAYS * 86_400 + 0.5)  # every result of the run is now older than that
    (plan,) = baton.say(f"plan {run_id}")
    rows = _rows(plan["text"])
    assert "cache entry expired" in rows["stamp"], plan["text"]
    assert "cache entry expired" not in rows["notify"] and "cache entry expired" not in rows["base"]

    (mark / "fixed").touch()
    resumed = baton.say(f"resume {run_id}")
    assert final_status(resumed) == "completed"
    # the expired pure step ran again; the unsafe step and the result it was computed from did not
    assert [_count(mark / f"{n}.log") for n in ("base", "notify", "stamp")] == [1, 1, 2]

    (status,) = baton.say(f"status {run_id}")
    assert "cache entry expired" in _rows(status["text"])["stamp"], status["text"]


def test_without_the_setting_the_same_resume_re_uses_every_result(baton: BatonCli, tmp_path: Path) -> None:
    mark = tmp_path / "marks"
    mark.mkdir()
    (baton.workflows / "aging.yaml").write_text(AGING.format(mark=mark))
    baton.env_extra.update(BATON_STEP_SANDBOX="none")
    (run_id,) = run_ids(baton.say('run aging "go"'))
    time.sleep(RETENTION_DAYS * 86_400 + 0.5)
    (plan,) = baton.say(f"plan {run_id}")
    assert "cache entry expired" not in plan["text"]
    (mark / "fixed").touch()
    assert final_status(baton.say(f"resume {run_id}")) == "completed"
    assert [_count(mark / f"{n}.log") for n in ("base", "notify", "stamp")] == [1, 1, 1]
