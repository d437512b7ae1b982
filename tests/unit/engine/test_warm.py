"""`core/engine/warm.py` without bubblewrap: what a step hands a warmed sandbox's stub, and
when it must start cold instead (a name the stub's `export` cannot take, a NUL, too much)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from core.engine import warm
from core.engine.sandbox import NO_SANDBOX, Sandbox


def stub(payload: bytes, cwd: Path, stdin: bytes = b"") -> str:
    """What the stub, fed `payload` (and then `stdin`) as Baton feeds it, runs and prints."""
    assert payload.count(b"\n") == 1 and payload.endswith(b"\n")  # one line: the stub reads no further
    done = subprocess.run(
        ["dash", "-c", warm.STUB, "baton-stub"], input=payload + stdin, capture_output=True, env={}, cwd=cwd,
        timeout=10, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_the_payload_is_what_the_stub_execs_exactly(tmp_path: Path) -> None:
    env = {"A": "x y", "ODD": "a=b\n$(touch pwned) '\" \\", "EMPTY": "", "PATH": os.environ["PATH"]}
    argv = ["sh", "-c", 'cat; printf "[%s]" "$0" "$1"', "-i", "--"]
    payload = warm._payload(argv, env, stdin=True)
    assert payload is not None
    assert stub(payload, tmp_path, b"the step's stdin\n") == "the step's stdin\n[-i][--]"
    payload = warm._payload(["env", "-0"], env, stdin=False)
    assert payload is not None
    said = stub(payload, tmp_path, b"not for the step")
    shown = dict(item.split("=", 1) for item in said.split("\0") if item)
    assert shown == env  # exactly: no PWD, no SHLVL of the stub's
    assert not (tmp_path / "pwned").exists()


def test_values_the_stub_cannot_hand_over_start_cold() -> None:
    assert warm._payload(["true"], {"A=B": "1"}, stdin=False) is None  # `export` cannot name them
    assert warm._payload(["true"], {"A-B": "1"}, stdin=False) is None
    assert warm._payload(["true"], {"1A": "1"}, stdin=False) is None
    assert warm._payload(["true"], {"": "1"}, stdin=False) is None
    assert warm._payload(["true"], {"A": "a\0b"}, stdin=False) is None  # refused cold, with its message
    assert warm._payload(["true"], {"A": "x" * warm.PAYLOAD_LIMIT}, stdin=False) is None  # E2BIG, said cold
    assert warm._payload([], {}, stdin=False) is None
    assert warm._payload(["true"], {"A": "1"}, stdin=True) == b"export 'A=1'; exec 'true'\n"
    assert warm._payload(["a=b", "it's"], {}, stdin=False) == b"exec </dev/null; exec 'a=b' 'it'\\''s'\n"


def test_only_a_sandbox_with_its_shell_warms() -> None:
    assert warm.WarmSandboxes.for_run(NO_SANDBOX) is None
    assert warm.WarmSandboxes.for_run(Sandbox(bwrap="/usr/bin/bwrap")) is None
    both = Sandbox(bwrap="/usr/bin/bwrap", shell="/usr/bin/dash")
    assert warm.WarmSandboxes.for_run(both) is not None
