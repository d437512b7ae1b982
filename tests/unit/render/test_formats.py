"""Platforms own their formatting: core renders for a platform it knows nothing about through
the `Format` its adapter registers (template folder, limit, code languages, escaping, filters),
and finds each installed platform's format without importing its adapter first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core import render as rendering
from core.commands.messages import Reply
from core.redaction import MASK, Redactor
from core.render import Format, format_of, platforms, register, render, render_reply
from core.splitting import width

ROOT = Path(__file__).resolve().parents[3]


def test_a_platform_core_does_not_know_renders_in_the_format_it_registers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rendering, "_formats", dict(rendering._formats))  # registered for this test only

    def shout(text: object) -> str:
        return str(text).upper()

    fmt = register(Format(name="test-pager", templates="console", limit=80,
                          escapes=(shout,), filters={"shout": shout}))
    assert format_of("test-pager") is fmt
    reply = Reply(kind="error", data={"message": "word " * 60, "hint": "secret-abc"})
    chunks = render(reply, "test-pager", Redactor(()))
    assert len(chunks) > 1 and all(width(c) <= 80 for c in chunks)
    # a secret is hidden also in the form this platform's escaping gives it
    hidden = render_reply(Reply(kind="error", data={"message": "SECRET-ABC", "hint": "h"}), fmt,
                          Redactor(("secret-abc",))).text
    assert "SECRET-ABC" not in hidden and MASK in hidden


def test_a_platform_without_a_format_of_its_own_is_shown_in_the_default_one() -> None:
    reply = Reply(kind="error", data={"message": "m", "hint": "h"})
    assert format_of("no-such-platform") is format_of("console")
    assert render(reply, "no-such-platform", Redactor(())) == render(reply, "console", Redactor(()))


def test_every_installed_platform_is_found_without_importing_its_adapter() -> None:
    assert {"console", "slack", "discord"} <= set(platforms())
    code = ("import sys; from core.render import format_of; "
            "f = format_of('discord'); print(f.limit, f.templates, 'adapters.discord' in sys.modules, "
            "'adapters.slack' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True, timeout=60).stdout.split()
    assert out == ["2000", "discord", "True", "False"]  # found through pyproject's entry point


def test_core_render_names_no_platform() -> None:
    source = (ROOT / "core" / "render.py").read_text()
    assert not [name for name in ("slack", "discord", "console") if name in source.lower()]
