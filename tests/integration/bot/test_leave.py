"""The `baton` executable leaves without tearing the interpreter down (core/exiting.py `leave`),
yet ends as Python would: exit handlers run, output flushed, the same status, and a thread
still working is waited for. Each case is a real interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _leave(body: str) -> subprocess.CompletedProcess[str]:
    header = "import atexit, io, os, sys, threading, time\nfrom core.exiting import leave\n"
    code = header + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)


def test_exit_handlers_run_and_buffered_output_arrives_whole_with_the_status() -> None:
    done = _leave("""
        atexit.register(lambda: print("handler ran"))
        sys.stdout.write("x" * 200_000)  # held in the buffer until the flush
        sys.stderr.write("a warning")
        leave(3)
    """)
    assert done.returncode == 3
    assert done.stdout == "x" * 200_000 + "handler ran\n"
    assert done.stderr == "a warning"


def test_the_interpreter_is_not_torn_down() -> None:
    """What a teardown would do (free the modules' objects, run their finalizers) is skipped:
    that is the time `leave` saves."""
    source = """
        class Finalized:
            def __del__(self):
                print("torn down")
        kept = Finalized()
        {end}
    """
    assert _leave(source.format(end="leave(0)")).stdout == ""
    assert _leave(source.format(end="sys.exit(0)")).stdout == "torn down\n"  # what Python does


def test_statuses_follow_pythons_rules() -> None:
    assert _leave("leave(None)").returncode == 0
    assert _leave("leave(True)").returncode == 1
    message = _leave("leave('no workflow named deploy')")
    assert (message.returncode, message.stderr) == (1, "no workflow named deploy\n")


def test_an_output_whose_reader_is_gone_exits_120_as_python_does() -> None:
    gone = """
        read, write = os.pipe()
        os.close(read)
        sys.stdout = io.TextIOWrapper(io.FileIO(write, "w"))
        sys.stdout.write("nobody reads this")
        leave({status})
    """
    assert _leave(gone.format(status=0)).returncode == 120
    assert _leave(gone.format(status=2)).returncode == 2  # a failure keeps its own status


def test_a_stream_the_program_closed_is_skipped_as_python_does() -> None:
    """A tool that closed `sys.stdout` still ends 0 (the tool runner's exit status decides
    whether its step failed)."""
    assert _leave("sys.stdout.close()\nleave(0)").returncode == 0
    assert _leave("sys.stderr.close()\nleave(5)").returncode == 5


def test_a_thread_still_working_is_waited_for() -> None:
    done = _leave("""
        def work():
            time.sleep(0.3)
            print("finished its work", flush=True)
        threading.Thread(target=work).start()
        leave(4)
    """)
    assert (done.returncode, done.stdout) == (4, "finished its work\n")


def test_baton_say_through_the_executable_prints_every_reply_and_its_status(tmp_path: Path) -> None:
    """The real `baton` entry point (bot.startup.main) on a command that succeeds and on one
    that is refused: the JSON of the replies arrives whole, each with its exit status."""
    env = {"PATH": "/usr/bin:/bin", "BATON_DATA_DIR": str(tmp_path / "data"), "BATON_STEP_SANDBOX": "none",
           "BATON_WORKFLOW_DIRS": f'["{ROOT / "workflows"}"]', "HOME": str(tmp_path)}
    entry = "from bot.startup import main; main()"

    def baton(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", entry, *args], cwd=tmp_path, env={**env, **more},
                              capture_output=True, text=True, timeout=120, check=False)

    ok = baton("say", "--json", "--wait", "run hello hi")
    assert ok.returncode == 0, ok.stderr
    assert "Hello from Baton: hi" in json.dumps(json.loads(ok.stdout))
    refused = baton("say", "help", BATON_STEP_SANDBOX="bogus")
    assert refused.returncode == 2, (refused.returncode, refused.stderr)
    assert refused.stderr.startswith("error: BATON_STEP_SANDBOX"), refused.stderr
