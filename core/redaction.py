"""Secret redaction: one `Redactor` for chat replies, logs and the stderr tails of steps.

Build it once from the secrets Baton knows (`Settings.secrets()` plus any secrets the
operator passes to steps) and hand it to whoever shows text to people:

    redactor = Redactor(settings.secrets())
    redactor.redact("token xoxb-123456 leaked")   # 'token ••• leaked'

Secrets shorter than `MIN_SECRET_LENGTH` characters are ignored: masking every "1" or
"yes" in a log would hide more than it protects. The redactor never shows its secrets,
not even in its `repr`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MASK = "•••"
MIN_SECRET_LENGTH = 4


@dataclass(frozen=True, slots=True, init=False)
class Redactor:
    """Replaces every occurrence of each known secret with `MASK`."""

    secrets: tuple[str, ...] = field(repr=False)
    _pattern: re.Pattern[str] | None = field(repr=False, compare=False)

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        kept = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=lambda s: (-len(s), s)))
        object.__setattr__(self, "secrets", kept)
        # longest first, so a secret that contains another is masked whole
        pattern = re.compile("|".join(re.escape(s) for s in kept)) if kept else None
        object.__setattr__(self, "_pattern", pattern)

    def redact(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def with_secrets(self, more: Iterable[str]) -> Redactor:
        """A redactor that also hides `more`."""
        return Redactor((*self.secrets, *more))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:
        return f"Redactor({len(self.secrets)} secrets)"


#: Redacts nothing; the default where no secrets are configured.
NO_SECRETS = Redactor()
