from __future__ import annotations

import base64
import json
import re
import threading
from urllib.parse import quote, quote_plus

from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.formatting import discord_escape
from adapters.slack.formatting import slack_escape
from core.redaction import MASK, Redactor


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


def test_added_secrets_are_hidden_from_then_on_by_every_holder_of_the_redactor() -> None:
    redactor = Redactor(["token-1"])
    held = redactor  # e.g. the log handler and a renderer hold the same instance
    redactor.add(["token-2"])
    assert held.redact("token-1 token-2") == f"{MASK} {MASK}"
    assert Redactor(()).redact("token-1") == "token-1"


def test_a_secret_is_hidden_in_its_json_escaped_form() -> None:
    secret = 'pa"ss\\word'
    document = json.dumps({"password": secret})
    assert secret not in Redactor([secret]).redact(document)
    assert Redactor([secret]).redact(document) == json.dumps({"password": MASK}, ensure_ascii=False)


def test_forms_hide_what_a_platform_escaping_makes_of_a_secret() -> None:
    secret = "sk_live_<abc>&def"
    redactor = Redactor([secret])
    escaped = f"token {slack_escape(secret)} / {discord_escape(secret)}"
    assert slack_escape(secret) in redactor.redact(escaped)  # the plain redactor misses it
    shown = redactor.forms(slack_escape, discord_escape).redact(escaped)
    assert shown == f"token {MASK} / {MASK}"
    assert redactor.forms(slack_escape, discord_escape) is redactor.forms(slack_escape, discord_escape)
    redactor.add(["another-secret"])
    assert redactor.forms(slack_escape).redact("another-secret") == MASK  # rebuilt after `add`


def test_redact_value_walks_mappings_lists_and_keys() -> None:
    redactor = Redactor(["hunter22"])
    value = {"a": ["x hunter22", ("hunter22",)], "hunter22": 3, "n": None}
    assert redactor.redact_value(value) == {"a": [f"x {MASK}", (MASK,)], MASK: 3, "n": None}


def test_adding_while_other_threads_redact_never_breaks_a_redaction() -> None:
    redactor = Redactor(["first-secret"])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                assert redactor.redact("first-secret") == MASK
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for n in range(200):
        redactor.add([f"secret-number-{n}"])
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert redactor.redact("secret-number-199") == MASK


def test_a_reply_shows_no_secret_in_its_text_buttons_choice_lists_or_run_id_on_any_platform() -> None:
    from core.commands.messages import Button, Menu, Reply
    from core.render import platforms, redacted, render

    secret = "sk_live_<choice>&secret"
    redactor = Redactor([secret])
    reply = Reply(
        kind="error",
        data={"message": f"bad token {secret}", "hint": "x" * 150 + secret},  # a preview would cut it
        buttons=(Button(f"Use {secret}", f"run x {secret}"),),
        menus=(Menu(f"Pick {secret}", (Button(secret, f"approve {secret}"),)),),
        run_id=secret,
    )
    shown = redacted(reply, redactor)
    everything = [*(b.label + b.command for b in shown.buttons), shown.menus[0].placeholder,
                  *(o.label + o.command for o in shown.menus[0].options), shown.run_id or ""]
    assert not any(secret in text for text in everything)
    for platform in platforms():
        text = "\n".join(render(reply, platform, redactor))
        assert "sk_live" not in text and "choice" not in text, (platform, text)
    plain = Reply(kind="error", data={"message": "nothing secret", "hint": ""})
    assert redacted(plain, redactor) is plain  # nothing to hide: not even copied


# -- cuts that split no secret ------------------------------------------------------------------

_CUT_SECRETS = ["ghp_DeclaredSecret1", 'quo"te-secret', "sécret-ünïcode", "abab-abab"]


def _occurrences(data: bytes, redactor: Redactor) -> list[tuple[int, int]]:
    found = []
    for form in redactor._forms_bytes():
        index = data.find(form)
        while index != -1:
            found.append((index, index + len(form)))
            index = data.find(form, index + 1)
    return found


def test_a_cut_inside_a_secret_moves_to_its_start_or_past_its_end() -> None:
    redactor = Redactor(["ghp_DeclaredSecret1"])
    data = b"token=ghp_DeclaredSecret1 and the rest"
    assert redactor.cut_before(data, 19) == 6  # `token=ghp_DeclaredSe` would have been kept
    assert redactor.cut_after(data, 19) == 25
    assert (redactor.cut_before(data, 6), redactor.cut_before(data, 25)) == (6, 25)  # on an edge: as is
    assert Redactor([]).cut_before(data, 19) == 19


@given(
    st.lists(st.sampled_from(_CUT_SECRETS) | st.text(alphabet='ab-_ ghp"é', max_size=12), max_size=12),
    st.integers(min_value=0, max_value=300),
)
def test_no_cut_ever_splits_a_secret(pieces: list[str], at: int) -> None:
    redactor = Redactor(_CUT_SECRETS)
    data = "".join(pieces).encode()
    at = min(at, len(data))
    before, after = redactor.cut_before(data, at), redactor.cut_after(data, at)
    assert before <= at <= after
    for start, end in _occurrences(data, redactor):
        assert not start < before < end and not start < after < end


def test_bytes_are_redacted_longest_first_whatever_their_encoding() -> None:
    redactor = Redactor(["abcd", "abcdefgh", "sécret"])
    data = b"\xff abcdefgh abcd " + "sécret".encode()
    assert redactor.redact_bytes(data) == b"\xff " + "••• ••• •••".encode()
    assert Redactor([]).redact_bytes(data) == data


@given(
    secret=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=8, max_size=40),
    before=st.binary(max_size=7),
    after=st.binary(max_size=7),
)
def test_a_secret_base64_encoded_anywhere_in_its_bytes_is_masked(
    secret: str, before: bytes, after: bytes
) -> None:
    """Whatever precedes it (`user:` of `curl -u`), no 6 bytes of the secret decode from what is shown."""
    redactor = Redactor([secret])
    encoded = base64.b64encode(before + secret.encode() + after).decode()
    shown = redactor.redact(encoded)
    assert MASK in shown
    raw = secret.encode()
    for piece in shown.split(MASK):  # each piece read from each offset, as a decoder would
        for start in range(4):
            body = piece[start:][: (len(piece) - start) // 4 * 4]
            decoded = base64.b64decode(body)
            assert not any(raw[i : i + 6] in decoded for i in range(len(raw) - 5))


@given(
    secret=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=8, max_size=40),
    before=st.binary(max_size=7),
    after=st.binary(max_size=7),
    url_safe=st.booleans(),
)
def test_no_base64_character_that_holds_a_bit_of_a_secret_is_shown(
    secret: str, before: bytes, after: bytes, url_safe: bool
) -> None:
    """Each base64 character carries 6 bits: those that carry any bit of the secret's first or
    last byte (shared with its neighbours) are masked with it, and its padding; what is shown
    is the encoding of what precedes and follows the secret only."""
    raw = secret.encode()
    encode = base64.urlsafe_b64encode if url_safe else base64.b64encode
    encoded = encode(before + raw + after).decode()
    first = len(before) * 8 // 6  # the first character holding a bit of the secret
    last = ((len(before) + len(raw)) * 8 - 1) // 6  # and the last one
    for shown in (Redactor([secret]).redact(encoded),
                  Redactor([secret]).redact_bytes(encoded.encode()).decode()):
        head, mask, tail = shown.partition(MASK)
        assert mask and MASK not in tail, shown
        assert encoded.startswith(head) and len(head) <= first
        assert encoded.endswith(tail) and len(encoded) - len(tail) > last


def test_a_secret_percent_encoded_hex_or_url_safe_base64_is_masked() -> None:
    secret = "ghp_Abc+/def=Secret 98765?&"
    redactor = Redactor([secret])
    for shown in (quote(secret, safe=""), quote(secret), quote_plus(secret), secret.encode().hex(),
                  base64.urlsafe_b64encode(b"ci:" + secret.encode()).decode()):
        assert redactor.redact(f"url=https://x/?t={shown}&y=1").count(MASK) == 1, shown
    slack = redactor.forms(slack_escape)  # a platform's escaping, of an encoded form too
    assert MASK in slack.redact(slack_escape(quote_plus(secret)))


def test_short_secrets_get_no_encoded_forms() -> None:
    """base64 of a 5-character secret is ordinary text (`aGVsbG8` is "hello")."""
    redactor = Redactor(["hello"])
    assert redactor.redact("aGVsbG8= 68656c6c6f") == "aGVsbG8= 68656c6c6f"


@given(before=st.integers(min_value=0, max_value=80), after=st.integers(min_value=0, max_value=80))
def test_a_secret_whose_base64_a_line_break_splits_is_masked(before: int, after: int) -> None:
    """`base64` wraps at 76 columns (`env | base64`): the block is hidden whole when its lines,
    joined, hold the secret; the text around it stays."""
    secret = "ghp_Abc+/def=Secret9876543210xyz"
    block = base64.encodebytes(b"a" * before + secret.encode() + b"b" * after).decode()
    shown = Redactor([secret]).redact(f"env follows:\n{block}-- done --\n")
    assert shown.startswith("env follows:\n") and shown.endswith("-- done --\n")
    joined = shown.replace("\n", "")
    for start in range(4):
        for run in re.findall(r"[A-Za-z0-9+/]{8,}", joined[start:]):
            body = run[: len(run) // 4 * 4]
            decoded = base64.b64decode(body)
            assert not any(secret.encode()[i : i + 6] in decoded for i in range(len(secret) - 5))
