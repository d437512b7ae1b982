"""Secret redaction: one `Redactor` for chat replies, logs, audit entries and steps' stderr.

The runtime builds it once (`bot/runtime.py`) from every secret the process knows: the
settings' secret fields, the password of the database URL, every value of the operator's
secrets file and every secret a loaded workflow declares. Whoever shows text to people
receives that one instance; there is no default that hides nothing.

    redactor = Redactor(["xoxb-123456"])
    redactor.redact("token xoxb-123456 leaked")   # 'token ••• leaked'
    redactor.add(["ghp_abcdef"])                  # a secret a workflow declared later

A secret is also hidden in its JSON-escaped forms (`"a\\"b"` inside a JSON document; with
`\\uXXXX` for what is not ASCII, as `json.dumps` writes it by default) and in
the forms a program gives it on its way out (`encoded_forms`): base64, standard and URL-safe,
wherever it sits in the encoded bytes (`curl -v -u user:$TOKEN` prints `Authorization: Basic
<base64 of user:token>`; a block `base64` wrapped into lines is hidden whole when its joined
lines hold one), percent-encoding (a URL's query) and hex (lower case, as `xxd -p` prints
it); `forms()` lets a renderer add the forms its escaping produces, of each of those.
Deliberate disguise (a secret reversed, spaced out, XORed) no redactor can see: a step holds
only the secrets it declares. Secrets shorter than `MIN_SECRET_LENGTH` characters are
ignored: masking every "1" or "yes" would hide more than it protects. The redactor never
shows its secrets, not even in its `repr`.

Text is redacted whole, then cut; where bytes must be cut before anyone redacts them (a
step's output kept up to `BATON_MAX_OUTPUT_BYTES`, the end of its stderr), `cut_before` and
`cut_after` move the cut off any secret it would split, so no prefix or suffix of a secret
is ever left at a cut for a later redaction to miss.

    redactor.cut_before(b"token=ghp_abcdef ...", 10)   # 6: the cut moves to where the secret starts

Secrets are only ever added, never removed: a value that was a secret once stays hidden.
Adding makes a new matcher (its pattern compiled when first needed); `redact` reads
whichever matcher is current (a reference swap), so threads that log while a secret is added
see the old or the new pattern, whole.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "•••"
MIN_SECRET_LENGTH = 4
#: characters a secret needs before its encoded forms are hidden too (shorter ones would mask
#: ordinary text: 6 bytes of base64 are 8 characters)
MIN_ENCODED_LENGTH = 8
_URL_SAFE = str.maketrans("+/", "-_")


def _json_form(secret: str) -> str:
    return json.dumps(secret, ensure_ascii=False)[1:-1]


def _json_ascii_form(secret: str) -> str:
    """The JSON string of a secret as most programs write it (`json.dumps`' default): every
    character past ASCII as `\\uXXXX` (`pässwort` is `p\\u00e4sswort`)."""
    return json.dumps(secret)[1:-1]


#: the forms every redactor hides, of each secret and each of its encoded forms
_JSON_FORMS = (_json_form, _json_ascii_form)


def encoded_forms(secret: str) -> set[str]:
    """The forms `secret` takes once a program encoded it (empty under `MIN_ENCODED_LENGTH`).

    Base64 turns each 3 bytes into 4 characters, so what a secret looks like depends on where
    it starts in the encoded bytes (`user:` before it shifts it by 2): for each of the three
    offsets, the characters that depend on its bytes alone, i.e. those of its whole 3-byte groups
    (the at most 2 bytes at either end share a character with their neighbours and stay)."""
    if len(secret) < MIN_ENCODED_LENGTH:
        return set()
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {quote(secret, safe=""), quote(secret), quote_plus(secret), raw.hex(), *base64_forms(secret)}
    forms.discard(secret)
    return forms


def base64_forms(secret: str) -> set[str]:
    """The base64 forms of `encoded_forms`: each is masked with the characters next to it that
    its secret's edge bytes share with their neighbours (up to 3 on each side, and the
    padding), so not even the bits of a secret's first or last byte are shown."""
    if len(secret) < MIN_ENCODED_LENGTH:
        return set()
    raw = secret.encode("utf-8", "surrogatepass")
    forms: set[str] = set()
    for skip in range(3):
        whole = raw[skip : len(raw) - (len(raw) - skip) % 3]
        if len(whole) >= 6:
            encoded = base64.b64encode(whole).decode("ascii")
            forms.update((encoded, encoded.translate(_URL_SAFE)))
    return forms


class Redactor:
    """Replaces every occurrence of each known secret (and its encoded forms) with `MASK`."""

    __slots__ = ("_binary", "_derived", "_encoders", "_lock", "_matcher", "_secrets")

    def __init__(
        self, secrets: Iterable[str], *, encoders: Iterable[Callable[[str], str]] = ()
    ) -> None:
        self._secrets: frozenset[str] = frozenset()
        self._encoders: tuple[Callable[[str], str], ...] = (*_JSON_FORMS, *encoders)
        #: every form to hide and the pattern matching any of them, swapped whole
        self._matcher: _Matcher | None = None
        self._lock = threading.Lock()
        #: redactors over the same secrets with more encoded forms, by encoders (`forms`)
        self._derived: dict[tuple[Callable[[str], str], ...], tuple[frozenset[str], Redactor]] = {}
        #: the forms as UTF-8 bytes, for cuts of raw output (`cut_before`), made when first needed
        self._binary: tuple[object, tuple[bytes, ...]] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Hide these too (from now on, everywhere this redactor is used)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        with self._lock:
            if new <= self._secrets:
                return
            self._secrets = self._secrets | new
            self._matcher = _compile(self._secrets, self._encoders)

    def forms(self, *encoders: Callable[[str], str]) -> Redactor:
        """A redactor over the same secrets that also hides `encoder(secret)` for each
        encoder (e.g. a platform's markdown escaping). Kept until a secret is added, so
        asking again for the same encoders is a dictionary lookup."""
        secrets = self._secrets
        derived = self._derived.get(encoders)
        if derived is not None and derived[0] is secrets:
            return derived[1]
        redactor = Redactor(secrets, encoders=(*self._encoders[len(_JSON_FORMS):], *encoders))
        self._derived[encoders] = (secrets, redactor)
        return redactor

    def redact(self, text: str) -> str:
        matcher = self._matcher
        if matcher is None or not text:
            return text
        if "\n" in text and _WRAPPED_LINE.search(text) is not None:
            text = _WRAPPED_BASE64.sub(lambda m: _wrapped(m.group(0), matcher.forms), text)
        # most text holds no secret: substring searches are several times faster than the regex
        if not any(form in text for form in matcher.forms):
            return text
        if matcher.edged and any(form in text for form in matcher.edged):
            text = _with_edges(text, matcher.edges())
        return matcher.pattern().sub(MASK, text)

    def redact_value(self, value: Any) -> Any:
        """`value` with every string in it (mapping keys included) redacted; other leaves as is.
        A value holding no secret at all (the usual case) is returned as it is, after one
        substring search over all its strings together."""
        matcher = self._matcher
        if matcher is None:
            return value
        joined = "\x00".join(_strings(value))
        if not any(form in joined for form in matcher.forms):
            return value
        return self._redact_value(value)

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {self._redact_value(k): self._redact_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._redact_value(v) for v in value)
        return value

    def longest(self) -> int:
        """Bytes (UTF-8) of the longest form a secret takes: how far past a cut to look."""
        forms = self._forms_bytes()
        return len(forms[0]) if forms else 0

    def cut_before(self, data: bytes, at: int) -> int:
        """The largest cut at or before `at` that splits no secret of `data` (in any of its
        forms): `at`, or the start of the secret that straddles it (and so on). `data` should
        hold `longest()` bytes past `at`, so a secret straddling it can be seen whole."""
        at = min(at, len(data))
        while (found := self._straddling(data, at)) is not None:
            at = found[0]
        return at

    def cut_after(self, data: bytes, at: int) -> int:
        """The smallest cut at or after `at` that splits no secret of `data`: for keeping the
        end of a stream (`data[cut:]`) with no secret's tail at its start."""
        while (found := self._straddling(data, at)) is not None:
            at = found[1]
        return at

    def _straddling(self, data: bytes, at: int) -> tuple[int, int] | None:
        """(start, end) of the earliest-starting secret occurrence with start < at < end."""
        best: tuple[int, int] | None = None
        for form in self._forms_bytes():
            size = len(form)
            lo = max(0, at - size + 1)
            index = data.find(form, lo, at + size - 1)
            while index != -1 and index < at:
                if index + size > at and (best is None or index < best[0]):
                    best = (index, index + size)
                    break
                index = data.find(form, index + 1, at + size - 1)
        return best

    def _forms_bytes(self) -> tuple[bytes, ...]:
        matcher = self._matcher
        if matcher is None:
            return ()
        binary = self._binary
        if binary is None or binary[0] is not matcher:
            forms = tuple(f.encode("utf-8", "surrogatepass") for f in matcher.forms)
            binary = (matcher, tuple(sorted(forms, key=len, reverse=True)))
            self._binary = binary
        return binary[1]

    def redact_bytes(self, data: bytes) -> bytes:
        """`data` (a file, any encoding) with each form of each secret (its UTF-8 bytes, JSON
        and encoded forms) masked, longest first."""
        mask = MASK.encode()
        matcher = self._matcher
        binary = matcher.binary() if matcher is not None else None
        if binary is not None and matcher is not None and any(f.encode() in data for f in matcher.edged):
            data = binary.sub(mask, data)
        for form in self._forms_bytes():
            data = data.replace(form, mask)
        return data

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets, longest first (replacing them in this order masks a secret that
        contains another whole)."""
        return tuple(sorted(self._secrets, key=lambda s: (-len(s), s)))

    def __bool__(self) -> bool:
        return self._matcher is not None

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value (mapping keys included), iteratively."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


#: a line of base64 as `base64` (76 columns) or `openssl base64` (64) wraps it
_WRAPPED_LINE = re.compile(r"^[A-Za-z0-9+/]{60,76}\n", re.MULTILINE)
#: a block of such lines (and its last, shorter one): one base64 text, wrapped
_WRAPPED_BASE64 = re.compile(r"(?:^[A-Za-z0-9+/]{60,76}\n)+[A-Za-z0-9+/]*={0,2}$", re.MULTILINE)


def _wrapped(block: str, forms: tuple[str, ...]) -> str:
    """A wrapped base64 block hidden whole when, once its lines are joined, it holds a secret's
    form: one that straddles a line break is seen too (`env | base64`)."""
    joined = block.replace("\n", "")
    return MASK if any(form in joined for form in forms) else block


#: a base64 character (standard or URL-safe) next to a secret's base64 form: it may carry bits
#: of the secret's first or last byte
_EDGE = "[A-Za-z0-9+/_-]{0,3}"
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")


def _with_edges(text: str, edged: re.Pattern[str]) -> str:
    """`text` with each base64 form `edged` finds masked together with up to 3 base64
    characters on either side and its padding (`_EDGE`): found as literals, then widened, which
    is several times faster than a pattern that starts with a character class."""
    parts: list[str] = []
    done = 0
    for found in edged.finditer(text):
        start, end = found.span()
        while start > max(done, found.start() - 3) and text[start - 1] in _BASE64_CHARS:
            start -= 1
        while end < min(len(text), found.end() + 3) and text[end] in _BASE64_CHARS:
            end += 1
        while end < min(len(text), found.end() + 5) and text[end] == "=" and text[end - 2 : end] != "==":
            end += 1
        parts += (text[done:start], MASK)
        done = end
    return "".join(parts) + text[done:] if parts else text


class _Matcher:
    """The forms to hide, longest first (so a secret that contains another is masked whole), and
    the pattern matching any of them, compiled when text first holds one: secrets are added
    one by one as workflows load, and a pattern of hundreds of forms takes milliseconds. A
    base64 form (`edged`) is matched with its edge characters (`_EDGE`) and padding."""

    __slots__ = ("_binary", "_edges", "_pattern", "edged", "forms")

    def __init__(self, forms: tuple[str, ...], edged: tuple[str, ...] = ()) -> None:
        self.forms = forms
        self.edged = edged
        self._pattern: re.Pattern[str] | None = None
        self._edges: re.Pattern[str] | None = None
        self._binary: re.Pattern[bytes] | None = None

    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:  # two threads may both compile it: the same pattern
            self._pattern = re.compile("|".join(re.escape(s) for s in self.forms))
        return self._pattern

    def edges(self) -> re.Pattern[str]:
        """The base64 forms alone (`_with_edges` widens what it finds)."""
        if self._edges is None:
            self._edges = re.compile("|".join(re.escape(s) for s in self.edged))
        return self._edges

    def binary(self) -> re.Pattern[bytes] | None:
        """The base64 forms with their edges, over bytes (a file's); None when there are none."""
        if self._binary is None and self.edged:
            forms = "|".join(re.escape(s) for s in self.edged)
            self._binary = re.compile(f"{_EDGE}(?:{forms}){_EDGE}={{0,2}}".encode("ascii"))
        return self._binary


def _compile(secrets: frozenset[str], encoders: tuple[Callable[[str], str], ...]) -> _Matcher | None:
    plain = set(secrets)
    for secret in secrets:
        plain.update(encoded_forms(secret))
    forms = set(plain)
    for encode in encoders:  # the JSON form and a platform's escapes, of every form
        forms.update(encode(s) for s in plain)
    kept = tuple(sorted((f for f in forms if len(f) >= MIN_SECRET_LENGTH), key=lambda s: (-len(s), s)))
    base64_of = {form for secret in secrets for form in base64_forms(secret)}
    edged = tuple(f for f in kept if f in base64_of)
    return _Matcher(kept, edged) if kept else None
