"""The trust boundary through the application as assembled: `baton say`, `baton list` and the
handler that `build_baton` wires. Typed text never runs; pathological files and templates
neither stall the bot nor exhaust its memory; a huge output is capped."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from bot.app import build_baton
from core.commands.messages import ChatMessage
from core.config import Settings
from tests.e2e.console.cli import BatonCli, final_status, run_ids
from tests.unit.workflows.test_limits import LAUGHS

MARK = "MARK"
HOSTILE = f'it\'s "$(touch {MARK})" `touch {MARK}` ; touch {MARK} \\ ${{HOME}} EOF'
QUOTING = """\
name: quoting
nodes:
  - id: echo
    replay: pure
    bash: |
      printf 'bare:%s\\n' {{ inputs.message }}
      printf "dq:%s\\n" "said {{ inputs.message }}"
      cat <<EOF
      heredoc:{{ inputs.message }}
      EOF
      echo "sub:$(printf '%s' {{ inputs.message }})"
"""
NESTED = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"


# The peak is measured by a small parent: a child forked straight from this (large) pytest
# worker starts with the worker's resident size as its high-water mark, which survives exec.
MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
open(sys.argv[1], "w").write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def rusage_run(baton: BatonCli, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """`baton <args>` and the peak memory (KB) of that process and its children."""
    out, err, measured = baton.home / ".stdout", baton.home / ".stderr", baton.home / ".rusage"
    command = [sys.executable, "-c", MEASURE, str(measured), sys.executable, "-m", "bot.main", *args]
    with out.open("w") as stdout, err.open("w") as stderr:
        subprocess.run(command, cwd=baton.home, env=baton.env(), stdout=stdout, stderr=stderr, check=True)
    returncode, peak = (int(field) for field in measured.read_text().split())
    return subprocess.CompletedProcess(command, returncode, out.read_text(), err.read_text()), peak


def test_typed_text_reaches_every_quoting_context_exactly(baton: BatonCli) -> None:
    (baton.workflows / "quoting.yaml").write_text(QUOTING)

    replies = baton.say(f"run quoting {json.dumps(HOSTILE)}")

    assert final_status(replies) == "completed"
    text = replies[-1]["text"]
    for context in ("bare", "dq", "heredoc", "sub"):
        expected = f"said {HOSTILE}" if context == "dq" else HOSTILE
        assert f"{context}:{expected}" in text
    assert not list(baton.home.rglob(MARK)), "typed text ran as code"


def test_a_placeholder_in_single_quotes_is_listed_as_broken_with_line_and_fix(baton: BatonCli) -> None:
    (baton.workflows / "sq.yaml").write_text(
        "name: sq\nnodes:\n  - id: a\n    bash: echo '{{ inputs.message }}'\n"
    )

    done = baton.run("list")

    assert done.returncode == 0, done.stderr
    line = next(line for line in (done.stdout + done.stderr).splitlines() if "sq.yaml:4" in line)
    assert "inside single quotes" in line
    assert "Close the single quotes" in done.stdout + done.stderr


def test_list_and_help_answer_with_bounded_memory_beside_pathological_files(baton: BatonCli) -> None:
    (baton.workflows / "laughs.yaml").write_text(LAUGHS)
    (baton.workflows / "nested.yaml").write_text(f'name: nested\nnodes:\n  - id: p\n    prompt: "{NESTED}"\n')
    (baton.workflows / "huge.yaml").write_text(
        "name: huge\nnodes:\n  - id: p\n    prompt: \"{{ 'x' * 10**9 }}\"\n"
    )

    listed, list_peak = rusage_run(baton, "list")
    helped, help_peak = rusage_run(baton, "say", "--json", "--user", "ana", "--", "help")

    assert listed.returncode == 0 and helped.returncode == 0, listed.stderr + helped.stderr
    assert "YAML aliases expand to more than 10,000 nodes" in listed.stdout + listed.stderr
    assert "nested" in listed.stdout and "huge" in listed.stdout
    assert json.loads(helped.stdout)[0]["kind"] == "help"
    assert max(list_peak, help_peak) < 250_000, (list_peak, help_peak)  # KB


def test_a_50_mb_output_is_capped_and_kept_whole_in_a_file(baton: BatonCli) -> None:
    (baton.workflows / "big.yaml").write_text(
        "name: big\nnodes:\n  - id: flood\n    bash: head -c 50000000 /dev/zero | tr '\\\\0' x\n"
    )

    done, peak = rusage_run(baton, "say", "--json", "--wait", "--user", "ana", "--", "run big")

    assert done.returncode == 0, done.stderr
    replies = json.loads(done.stdout)
    assert final_status(replies) == "completed"
    (run_id,) = run_ids(replies)
    spilled = baton.home / ".baton" / "runs" / run_id / ".outputs" / "flood.1.log"
    assert spilled.stat().st_size == 50_000_000
    assert f"1,000,000 of 50,000,000 bytes kept; all of it is in {spilled}" in replies[-1]["text"]
    assert len(replies[-1]["text"]) < 1_100_000
    assert peak < 250_000, peak  # KB: the 50 MB never sat in memory


async def test_another_conversation_is_answered_while_a_template_renders(tmp_path: Path) -> None:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "nested.yaml").write_text(f'name: nested\nnodes:\n  - id: p\n    prompt: "{NESTED}"\n')
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'baton.db'}",
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
        render_timeout=3.0,
    )
    baton = build_baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            start = ChatMessage("console", "A", "console:ana", "run nested", "e-run")
            (started,) = [r for r in await baton.handler.handle(start) if r.run_id]
            answered_while_rendering = 0
            latencies: list[float] = []
            for n in range(10_000):
                asked = time.monotonic()
                replies = await baton.handler.handle(
                    ChatMessage("console", "B", "console:bo", "runs", f"e{n}")
                )
                latencies.append(time.monotonic() - asked)
                assert replies and replies[0].kind == "runs"
                if baton.store.runs.get_run(started.run_id).status != "running":
                    break
                answered_while_rendering += 1
                await asyncio.sleep(0)  # the engine's tasks go on between messages, as in a server
            run = await baton.engine.wait(started.run_id, timeout=30)
    finally:
        baton.close()
    assert answered_while_rendering >= 5, latencies
    assert run.status == "failed"
    summary = baton.engine.summary(run)
    failed = next(n for n in summary.nodes if n.node_id == "p")
    assert failed.error is not None and "template rendering" in failed.error and "\n" not in failed.error


CODE_FORMS = {  # issue 25: forms that loaded and ran typed text; each is a load error now
    "herestring": "bash <<< {{ inputs.message }}",
    "piped": "echo {{ inputs.message }} | sh",
    "indirect": 'v={{ inputs.message }}\n      echo "${!v}"',
    "wrapped": "timeout 5 {{ inputs.message }} /tmp/x",
    "script": "bash {{ inputs.message }}",
}


def test_typed_text_fed_to_an_interpreter_is_refused_at_load_and_never_runs(baton: BatonCli) -> None:
    for name, command in CODE_FORMS.items():
        text = f"name: {name}\nnodes:\n  - id: a\n    bash: |\n      {command}\n"
        (baton.workflows / f"{name}.yaml").write_text(text)
    listed = {row["name"]: row for row in json.loads(baton.run("list", "--json").stdout)}
    for name in CODE_FORMS:
        error = listed[name]["error"]
        assert error is not None and f"{name}.yaml:{6 if name == 'indirect' else 5}:" in error, (name, error)
        assert listed[name]["hint"], name

    for name in CODE_FORMS:
        (reply,) = baton.say(f"run {name} --set message='a[$(touch {MARK})]'")
        assert reply["is_error"] and name in reply["text"], reply
    (reply,) = baton.say(f"run piped 'touch {MARK}'")
    assert "reaches the input of a program that runs its input as code" in reply["text"]
    assert baton.runs() == []
    assert not list(baton.home.rglob(MARK)), "typed text ran as code"
