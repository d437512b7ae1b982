"""Sockets of the machine a step must not reach (`bot/runtime.py` `step_sandbox`, real
bubblewrap): the database's socket directory wherever the URL puts it, and what the sandbox
shows again of a hidden runtime directory (the resolver's file, never its sockets)."""

from __future__ import annotations

import grp
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runtime import RESOLV_CONF, RUNTIME_DIRS, kept_groups, step_sandbox
from core.config import Settings
from core.engine.sandbox import configure
from tests.unix_service import answering

pytestmark = pytest.mark.bwrap

CONNECT = """\
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
    print("answered", s.recv(200).decode())
except OSError as exc:
    print("unreachable:", exc.strerror)
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory the sandbox would show (not under /tmp, /run or a home), readable by the
    step user: where an operator may keep a PostgreSQL socket (`?host=/srv/pg`)."""
    where = Path("/var/tmp") / f"baton-sockets-{uuid.uuid4().hex[:12]}"
    where.mkdir(mode=0o755)
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def listening(outside: Path) -> Iterator[tuple[Path, str]]:
    """A socket anyone may connect to in `outside`, which tells each peer a token."""
    path = outside / ".s.PGSQL.5432"
    with answering(path) as (token, _):
        yield path, token


def _step(settings: Settings, workdir: Path, socket_path: Path, *, network: bool = True) -> str:
    sandbox = step_sandbox(settings, {"HOME": str(workdir.parent / "home"), "PATH": "/usr/bin:/bin"})
    assert sandbox.enabled
    connect = [sys.executable, "-c", CONNECT, str(socket_path)]
    argv = sandbox.command(connect, workdir=workdir, network=network)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env={})
    return done.stdout + done.stderr


def test_the_database_socket_directory_is_hidden_wherever_the_url_puts_it(
    tmp_path: Path, listening: tuple[Path, str]
) -> None:
    path, token = listening
    tmp_path.chmod(0o755)
    workdir = tmp_path / "run"
    workdir.mkdir(mode=0o777)
    workdir.chmod(0o777)
    plain = Settings(  # type: ignore[call-arg]
        _env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap"
    )
    assert _step(plain, workdir, path).strip() == f"answered {token}"  # shown when not Baton's
    on_socket = plain.model_copy(update={"database_url": f"postgresql+psycopg://baton@/baton?host={path.parent}"})
    for network in (True, False):
        said = _step(on_socket, workdir, path, network=network)
        assert said.strip() == "unreachable: No such file or directory", said
        assert token not in said


def test_a_hidden_runtime_directory_shows_the_resolver_file_alone(tmp_path: Path, outside: Path) -> None:
    """/etc/resolv.conf often points into /run (systemd-resolved): that file stays readable,
    and nothing beside it (resolved's own socket) appears."""
    resolve = outside / "systemd" / "resolve"
    resolve.mkdir(parents=True)
    for d in (outside / "systemd", resolve):
        d.chmod(0o755)
    conf = resolve / "stub-resolv.conf"
    conf.write_text("nameserver 127.0.0.53\n")
    conf.chmod(0o644)
    (resolve / "io.systemd.Resolve").write_text("stands for resolved's socket\n")
    tmp_path.chmod(0o777)
    sandbox = configure("bwrap", hidden_dirs=[outside], shown_files=[conf])
    argv = sandbox.command(["bash", "-c", f"cat {conf}; ls -A {resolve} {outside}"], workdir=tmp_path)
    seen = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stdout.split()
    assert seen == ["nameserver", "127.0.0.53", f"{outside}:", "systemd", f"{resolve}:", "stub-resolv.conf"]


def test_steps_of_baton_see_no_runtime_directory_but_the_resolver(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap")  # type: ignore[call-arg]
    sandbox = step_sandbox(settings)
    for runtime in RUNTIME_DIRS:
        if runtime.is_dir():
            assert runtime.resolve() in sandbox.hidden_dirs
    assert sandbox.shown_files == (RESOLV_CONF.resolve(),)
    tmp_path.chmod(0o777)
    probe = "ls -A /run; cat /etc/resolv.conf >/dev/null && echo resolver-read"
    argv = sandbox.command(["bash", "-c", probe], workdir=tmp_path)
    seen = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert "resolver-read" in seen.stdout, seen.stderr
    assert "postgresql" not in seen.stdout and "user" not in seen.stdout.split()


def test_the_groups_a_step_of_an_unprivileged_baton_keeps_are_named() -> None:
    """bubblewrap's user namespace may not call setgroups: a step keeps Baton's groups."""
    groups = grp.getgrall()
    own, other = groups[0], next(g for g in groups if g.gr_gid != groups[0].gr_gid)
    assert kept_groups(own.gr_gid, [own.gr_gid]) == []
    kept = kept_groups(own.gr_gid, [own.gr_gid, other.gr_gid, other.gr_gid, 987654])
    assert kept == [other.gr_name, "987654"]


def test_baton_says_at_start_when_its_steps_keep_its_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    docker = next((g for g in grp.getgrall() if g.gr_gid != os.getgid()), None)
    assert docker is not None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # Baton as an unprivileged user, in one more group
    monkeypatch.setattr(os, "getgroups", lambda: [os.getgid(), docker.gr_gid])
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap")  # type: ignore[call-arg]
    with caplog.at_level(logging.WARNING, logger="baton.runtime"):
        step_sandbox(settings)
    (said,) = [r.getMessage() for r in caplog.records if getattr(r, "action", None) == "step_groups"]
    assert docker.gr_name in said and "run Baton as a user in no other group" in said
