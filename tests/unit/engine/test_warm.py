"""`core/engine/warm.py` without bubblewrap: what a step hands a warmed sandbox's stub, and
when it must start cold instead (the stub's `env` would read the value otherwise)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from core.engine import warm
from core.engine.sandbox import NO_SANDBOX, Sandbox


def test_the_payload_is_what_the_stub_execs_exactly(tmp_path: Path) -> None:
    env = {"A": "x y", "ODD": "a=b\n$(touch pwned) '\" \\", "EMPTY": ""}
    argv = ["sh", "-c", 'env; printf "[%s]" "$0" "$1"', "-i", "--"]
    payload = warm._payload(argv, env, stdin=False)
    assert payload is not None
    memfd = tmp_path / "payload"
    memfd.write_bytes(payload)
    with memfd.open("rb") as data:
        read, go = os.pipe()
        stub = subprocess.Popen(
            ["bash", "-c", warm.STUB, "baton-stub", str(read), str(data.fileno()), "/usr/bin/env"],
            pass_fds=(read, data.fileno()), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={},
            cwd=tmp_path,
        )
        os.close(read)
        os.write(go, b"go\n")
        os.close(go)
        out, err = stub.communicate(timeout=10)
    assert stub.returncode == 0, err
    said = out.decode()
    assert said.endswith("[-i][--]")
    shown = dict(line.split("=", 1) for line in said.rsplit("\n", 1)[0].split("\n") if "=" in line)
    assert shown["A"] == "x y" and shown["EMPTY"] == "" and "a=b" in said and "$(touch pwned)" in said
    assert not (tmp_path / "pwned").exists()


def test_values_the_stub_cannot_hand_over_start_cold() -> None:
    assert warm._payload(["a=b", "x"], {}, stdin=False) is None  # `env` would take it for a variable
    assert warm._payload(["true"], {"A=B": "1"}, stdin=False) is None
    assert warm._payload(["true"], {"": "1"}, stdin=False) is None
    assert warm._payload(["true"], {"A": "a\0b"}, stdin=False) is None  # refused cold, with its message
    assert warm._payload(["true"], {"A": "x" * warm.PAYLOAD_LIMIT}, stdin=False) is None  # E2BIG, said cold
    assert warm._payload([], {}, stdin=False) is None
    assert warm._payload(["true"], {"A": "1"}, stdin=True) == b"1\x001\x00A=1\x00true\x00"


def test_only_a_sandbox_with_its_shell_and_env_warms() -> None:
    assert warm.WarmSandboxes.for_run(NO_SANDBOX) is None
    assert warm.WarmSandboxes.for_run(Sandbox(bwrap="/usr/bin/bwrap")) is None
    both = Sandbox(bwrap="/usr/bin/bwrap", shell="/bin/bash", env_program="/usr/bin/env")
    assert warm.WarmSandboxes.for_run(both) is not None
