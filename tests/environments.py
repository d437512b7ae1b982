"""The step environment tests build engines and node contexts with, like the runtime's:
the allowlisted part of this process's environment, and a redactor of the given secrets."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.engine.step_env import StepEnvironment
from core.redaction import Redactor


def step_environment(
    secrets: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
    secrets_file: Path | None = None,
    redactor: Redactor | None = None,
    step_secrets: Sequence[str] = (),
) -> StepEnvironment:
    return StepEnvironment.from_environ(
        dict(os.environ) if environ is None else environ,
        redactor=redactor if redactor is not None else Redactor(secrets),
        secrets_file=secrets_file,
        step_secrets=step_secrets,
    )
