"""The run pages' signing key (core/signing_key.py) as `baton run` assembles it: never
in the database, a 0600 file of the data directory (or derived from BATON_WEB_SECRET), and
hidden like every secret, so a step that reads it shows nothing of it to people."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from core.errors import ConfigurationError
from core.render import render
from core.signing_key import KEY_FILE, key_file
from core.store.records import RunStatus
from tests.integration.web.site import Site

PEEK = """\
    name: peek
    nodes:
      - id: peek
        bash: |
          cat ../../web-signing.key
          echo "stderr too: $(cat ../../web-signing.key)" >&2
          exit 1
"""


async def test_the_key_lives_in_a_0600_file_never_in_the_database_and_is_hidden(
    tmp_path: Path, database_url: str
) -> None:
    # unsandboxed on purpose: a step that can read the data directory (with the sandbox it
    # cannot: tests/e2e/console/test_sandbox.py) still shows people nothing of the key
    async with Site.open(tmp_path, database_url, {"peek": PEEK}, step_sandbox="none") as site:
        path = site.settings.data_dir / KEY_FILE
        key = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(key) == 64
        assert site.links.secret() == key.encode()
        run = await site.start("run peek")
        assert run.status is RunStatus.FAILED  # the step read the file (no sandbox here) ...
        shown = [text for reply in site.told for text in render(reply, "console", site.baton.redactor)]
        shown += [text for reply in await site.say(f"status {run.id}") for text in render(
            reply, "console", site.baton.redactor)]
        page = (await site.client.get(await site.link(run))).text
        assert "stderr too: •••" in "\n".join(shown)  # ... and people see it masked everywhere
        for text in [*shown, page]:
            assert key not in text and key[:16] not in text
        assert site.baton.store.state.get_state("baton", "web_signing_key") is None
        assert key not in str(site.baton.store.events.audit_log(run.id))
    if database_url.startswith("sqlite"):  # nothing in the database file a step could `strings`
        database = Path(database_url.removeprefix("sqlite:///"))
        assert key.encode() not in database.read_bytes()


async def test_the_same_key_is_used_after_a_restart(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"peek": PEEK}) as site:
        first = site.links.secret()
    async with Site.open(tmp_path, sqlite_url, {"peek": PEEK}) as site:
        assert site.links.secret() == first  # links given before the restart keep working


async def test_with_baton_web_secret_the_key_is_derived_and_no_file_is_made(
    tmp_path: Path, sqlite_url: str
) -> None:
    async with Site.open(tmp_path / "a", sqlite_url, {"peek": PEEK}, web_secret="shared-by-replicas") as one:
        key = one.links.secret()
        assert not (one.settings.data_dir / KEY_FILE).exists()
        assert key != b"shared-by-replicas" and one.baton.redactor.redact(key.decode()) == "•••"
    async with Site.open(tmp_path / "b", sqlite_url, {"peek": PEEK}, web_secret="shared-by-replicas") as two:
        assert two.links.secret() == key  # another replica with the same secret signs alike


async def test_a_key_file_planted_as_a_symlink_is_refused_at_start(tmp_path: Path, sqlite_url: str) -> None:
    planted = tmp_path / "attacker.key"
    planted.write_text("0" * 64 + "\n")
    (tmp_path / ".baton").mkdir()
    os.symlink(planted, tmp_path / ".baton" / KEY_FILE)
    with pytest.raises(ConfigurationError, match=r"signing key .* cannot be used") as info:
        async with Site.open(tmp_path, sqlite_url, {"peek": PEEK}):
            pass
    assert "BATON_WEB_SECRET" in (info.value.hint or "")


def test_processes_making_the_key_at_once_all_get_the_same_one(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "data" / KEY_FILE
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: key_file(path), range(32)))
    assert len(keys) == 1 and [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no temporary left


def test_a_key_file_others_could_read_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    path.write_text("ab" * 32 + "\n")
    path.chmod(0o644)
    assert key_file(path) == b"ab" * 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("not a key\n")
    with pytest.raises(ConfigurationError, match="does not hold a key"):
        key_file(path)
