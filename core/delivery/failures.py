"""A chat platform's call that failed, as every adapter raises it and the core reads it.

    raise CallFailed(said, method="chat.update", error="not_in_channel", channel="C1")

`said` is what the person is told: a line of cause (the message) and one of next step (the
hint), a sentence of the platform's templates. `error` is the platform's own code, which the
core compares with the codes a transport declares (a place refusing: the next place is tried);
`transient`: it may pass (a 5xx or a rate limit past the retries, the platform unreachable),
the reply is sent again later.
"""

from __future__ import annotations

from core.errors import PlatformError


class CallFailed(PlatformError):
    """The platform refused a call, or could not be reached."""

    def __init__(self, said: str, *, method: str, error: str, channel: str | None,
                 transient: bool = False) -> None:
        self.method = method
        self.error = error
        self.channel = channel
        self.transient = transient
        #: what the user is told: a line of cause (the message) and one of next step (the hint)
        self.user_text = said
        message, _, hint = said.partition("\n")
        super().__init__(message, hint=hint)
