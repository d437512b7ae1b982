from __future__ import annotations

from core.redaction import MASK, NO_SECRETS, Redactor


def test_every_occurrence_of_every_secret_is_masked() -> None:
    redactor = Redactor(["xoxb-1234", "hunter22"])
    text = "token xoxb-1234 and hunter22, again xoxb-1234"
    assert redactor.redact(text) == f"token {MASK} and {MASK}, again {MASK}"


def test_a_secret_containing_another_is_masked_whole() -> None:
    redactor = Redactor(["abcd", "abcdefgh"])
    assert redactor.redact("[abcdefgh]") == f"[{MASK}]"


def test_short_secrets_are_ignored() -> None:
    redactor = Redactor(["yes", "", "1"])
    assert redactor.redact("yes 1") == "yes 1"
    assert not redactor


def test_regex_characters_in_secrets_are_literal() -> None:
    redactor = Redactor(["a.b*c(d)"])
    assert redactor.redact("a.b*c(d) aXbbc(d)") == f"{MASK} aXbbc(d)"


def test_repr_never_shows_secrets() -> None:
    redactor = Redactor(["supersecret"])
    assert "supersecret" not in repr(redactor)
    assert repr(redactor) == "Redactor(1 secrets)"


def test_with_secrets_adds_to_the_known_ones() -> None:
    redactor = NO_SECRETS.with_secrets(["token-1"]).with_secrets(["token-2"])
    assert redactor.redact("token-1 token-2") == f"{MASK} {MASK}"
    assert NO_SECRETS.redact("token-1") == "token-1"
