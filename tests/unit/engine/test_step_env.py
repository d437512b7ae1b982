"""Where a step's environment comes from (`core/engine/step_env.py`): the allowlist, the
operator's step secrets (a name BATON_STEP_SECRETS lists from the environment first, then the
secrets file, re-read when it changes); nothing else of Baton's environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.engine.step_env import SecretSource, StepEnvironment, inherited_variables
from core.errors import ConfigurationError, MissingSecret
from core.redaction import MASK, Redactor


def test_only_the_allowlisted_variables_are_inherited() -> None:
    environ = {
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC", "TMPDIR": "/t",
        "USER": "op", "BATON_DISCORD_TOKEN": "x", "SSH_AUTH_SOCK": "/s", "LD_PRELOAD": "/evil.so",
        "PYTHONPATH": "/p", "LCX": "no",
    }  # fmt: skip
    assert set(inherited_variables(environ)) == {"PATH", "HOME", "LANG", "LC_TIME", "TZ", "TMPDIR", "USER"}


def test_the_environment_wins_over_the_file_and_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    file = tmp_path / "secrets.env"
    file.write_text("A=from-file\nB='quoted value'\n# comment\nEMPTY\n")
    file.chmod(0o600)
    source = SecretSource({"A": "from-env"}, file, step_secrets=["A"])
    assert (source.get("A"), source.get("B"), source.get("EMPTY"), source.get("C")) == (
        "from-env", "quoted value", None, None)  # fmt: skip
    file.write_text("B=rotated-value-1\nC=new-one-22\n")
    os.utime(file, ns=(1, 1))  # a different mtime even on a coarse clock
    assert (source.get("B"), source.get("C")) == ("rotated-value-1", "new-one-22")


def test_a_secrets_file_that_does_not_exist_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"BATON_SECRETS_FILE: .* is not a readable file"):
        SecretSource({}, tmp_path / "missing.env")


def test_every_value_of_the_secrets_file_is_hidden_and_handed_out_secrets_too(tmp_path: Path) -> None:
    file = tmp_path / "secrets.env"
    file.write_text("UNDECLARED=file-only-secret\n")
    redactor = Redactor(())
    environ = {"GH": "ghp-env-secret", "OTHER": "not-a-step-secret"}
    steps = StepEnvironment.from_environ(environ, redactor=redactor, secrets_file=file, step_secrets=["GH"])
    assert redactor.redact("file-only-secret") == MASK  # declared or not
    assert redactor.redact("ghp-env-secret") == MASK  # listed in BATON_STEP_SECRETS: a secret at once
    assert steps.variables({}, ["GH"], node_id="n")["GH"] == "ghp-env-secret"


def test_require_names_every_missing_secret_of_the_workflow() -> None:
    steps = StepEnvironment.from_environ({"A": "value-a"}, redactor=Redactor(()), step_secrets=["A", "B"])
    with pytest.raises(MissingSecret) as info:
        steps.require("deploy", ["A", "B", "C"])
    assert info.value.message == (
        "workflow `deploy` needs the secrets `B`, `C`, "
        "which the operator has not provided "
        "(in BATON_SECRETS_FILE, or listed in BATON_STEP_SECRETS and set in Baton's environment)"
    )
    steps.require("deploy", ["A"])


def test_only_listed_names_and_the_files_names_are_provided_and_nothing_else_is_read(tmp_path: Path) -> None:
    file = tmp_path / "secrets.env"
    file.write_text("NPM_TOKEN=npm-value-1\nPGPASSWORD=from-the-file\n")
    file.chmod(0o600)
    environ = {"PGPASSWORD": "batons-own-db-pw", "AWS_SECRET_ACCESS_KEY": "cloud-key", "DEPLOY": "dep-v"}
    source = SecretSource(environ, file, step_secrets=["DEPLOY", "LISTED_UNSET"])
    assert source.provided() == {"DEPLOY", "LISTED_UNSET", "NPM_TOKEN", "PGPASSWORD"}
    # a name the file provides comes from the file, never from Baton's own environment
    assert source.get("PGPASSWORD") == "from-the-file"
    assert (source.get("AWS_SECRET_ACCESS_KEY"), source.get("LISTED_UNSET")) == (None, None)
    assert source.get("DEPLOY") == "dep-v"
    redactor = Redactor(())
    steps = StepEnvironment.from_environ(environ, redactor=redactor, step_secrets=["DEPLOY"])
    with pytest.raises(MissingSecret):
        steps.variables({}, ["AWS_SECRET_ACCESS_KEY"], node_id="n")
    assert "cloud-key" not in str(steps.secrets.__dict__)  # not even kept
