"""What the leak tests of every platform share: the secrets Baton is given, the workflows that
try to leak them, and the check that none of them (nor a piece of one) reached people.

Every secret contains `MARK` and nothing else Baton shows does, so a secret cut in half by a
preview or a chunk boundary is caught as well as a whole one (`leaks`), and so is one a
program encoded on its way out (base64 at any offset, hex, percent-encoding): `leaks` decodes
what could be such an encoding before it looks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from sqlalchemy.engine import make_url

MARK = "leakcheck"
SLACK_BOT = "xoxb-4242-leakcheck-b0t1"
SLACK_APP = "xapp-1-A0B-leakcheck-app9"
SLACK_SIGNING = "sgn-leakcheck-5e3c9a"
DISCORD = "MTk4_leakcheck.dsc_7a1f"  # underscores: Discord's markdown escaping rewrites them
OPENAI = "sk-leakcheck-oai-0b9d"
DB_PASSWORD = "pg-leakcheck-pw-71e4"
DEPLOY = "dep-leakcheck-env-4d2a"  # a declared step secret, from Baton's environment
FILE_SECRET = "fil-leakcheck-file-8c6b"  # a declared step secret, from BATON_SECRETS_FILE
UNICODE_SECRET = "üni-leakcheck-päss-3f1e"  # one past ASCII: `json.dumps` writes it `\u00fcni-…`
SETTINGS_SECRETS = (SLACK_BOT, SLACK_APP, SLACK_SIGNING, DISCORD, OPENAI, DB_PASSWORD)
STEP_SECRETS = (DEPLOY, FILE_SECRET, UNICODE_SECRET)
ALL = SETTINGS_SECRETS + STEP_SECRETS


def with_password(url: str) -> str:
    """`url` with `DB_PASSWORD` as its password (the test server trusts any password)."""
    return make_url(url).set(password=DB_PASSWORD).render_as_string(hide_password=False)


def fingerprint(secret: str) -> str:
    """What the `envdump` step prints to show it saw a secret without showing it."""
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def write_workflows(directory: Path, database_url: str) -> None:
    """`envdump` prints its whole environment (and proves it saw its two secrets); `leaky`
    fails with every secret Baton knows on its stderr."""
    (directory / "envdump.yaml").write_text(textwrap.dedent("""\
        name: envdump
        description: Prints everything a step can see
        secrets: [DEPLOY_TOKEN]
        nodes:
          - id: show
            secrets: [FILE_TOKEN]
            env: {MODE: audit}
            replay: pure
            bash: |
              env | sort
              printf 'saw %s %s\\n' "$(printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-12)" \\
                "$(printf %s "$FILE_TOKEN" | sha256sum | cut -c1-12)"
        """))
    stderr = " ".join([*SETTINGS_SECRETS, database_url])
    (directory / "leaky.yaml").write_text(textwrap.dedent(f"""\
        name: leaky
        description: Fails with every secret on its stderr
        secrets: [DEPLOY_TOKEN]
        nodes:
          - id: boom
            secrets: [FILE_TOKEN]
            bash: |
              echo "step secrets: $DEPLOY_TOKEN $FILE_TOKEN" >&2
              echo "settings: {stderr}" >&2
              exit 3
        """))


    # a declared secret straddling the output cap (run with BATON_MAX_OUTPUT_BYTES=1000)
    (directory / "straddle.yaml").write_text(textwrap.dedent("""\
        name: straddle
        description: A secret across the output cap
        nodes:
          - id: cap
            secrets: [FILE_TOKEN]
            bash: |
              head -c 990 /dev/zero | tr '\\0' x
              printf '%s' "$FILE_TOKEN"
              head -c 3000 /dev/zero | tr '\\0' y
        """))
    # one line holding a secret at every offset, so one straddles every chunk boundary
    (directory / "chunks.yaml").write_text(textwrap.dedent("""\
        name: chunks
        description: Secrets across the boundaries of chunks
        nodes:
          - id: chunks
            secrets: [DEPLOY_TOKEN]
            bash: |
              for i in $(seq 1 100); do head -c "$i" /dev/zero | tr '\\0' z; printf '%s' "$DEPLOY_TOKEN"; done
        """))


    # the step's own secrets as programs print them: base64 at each offset (`curl -v -u`'s
    # `Authorization: Basic`), URL-safe base64, hex, base64 wrapped across lines, JSON as
    # Python writes it (`\uXXXX` past ASCII)
    (directory / "encoded.yaml").write_text(textwrap.dedent("""\
        name: encoded
        description: Secrets encoded on their way out
        secrets: [DEPLOY_TOKEN]
        nodes:
          - id: encode
            secrets: [FILE_TOKEN, UNI_TOKEN]
            bash: |
              python3 -c 'import json, os; print(json.dumps({"t": os.environ["UNI_TOKEN"]}))'
              for prefix in "" u us; do printf '%s%s' "$prefix" "$DEPLOY_TOKEN" | base64 -w0; echo; done
              printf 'Authorization: Basic %s\\n' "$(printf 'ci:%s' "$FILE_TOKEN" | base64 -w0)"
              printf '%s\\n' "$FILE_TOKEN" | basenc --base64url
              printf '%s' "$DEPLOY_TOKEN" | od -An -v -tx1 | tr -d ' \\n'; echo
              printf '%041d%s%040d' 0 "$FILE_TOKEN" 0 | base64  # wrapped at 76: across a line break
        """))


def write_secrets_file(path: Path) -> Path:
    lines = f"# step secrets\nFILE_TOKEN={FILE_SECRET}\nUNI_TOKEN={UNICODE_SECRET}\n"
    path.write_text(lines, encoding="utf-8")
    path.chmod(0o600)
    return path


def leaks(text: str) -> list[str]:
    """The secrets `text` shows, whole or in part (any 8 characters of one), as they are or
    encoded (`decodings`)."""
    found = [s for s in ALL if any(s[i : i + 8] in seen for seen in decodings(text)
                                   for i in range(len(s) - 7))]
    return found or ([MARK] if MARK in text else [])


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_FROM_URL_SAFE = str.maketrans("-_", "+/")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def decodings(text: str) -> Iterator[str]:
    """`text`, percent-decoded, with JSON's `\\uXXXX` read, and each run of base64 (read from
    each of its four offsets) and of hex (from each of its two) in it, decoded."""
    yield text
    yield unquote_plus(text)
    yield _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    for run in _BASE64_RUN.findall(text):
        standard = run.translate(_FROM_URL_SAFE)
        for start in range(4):
            body = standard[start:]
            body = body[: len(body) - len(body) % 4]
            try:
                yield base64.b64decode(body).decode("latin-1")
            except binascii.Error:
                continue
    for run in _HEX_RUN.findall(text):
        for start in (0, 1):
            body = run[start:]
            yield bytes.fromhex(body[: len(body) - len(body) % 2]).decode("latin-1")


def dumped(value: Any) -> str:
    """JSON text of a recorded request body (its non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, default=str)
