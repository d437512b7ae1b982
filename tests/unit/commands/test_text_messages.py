"""`text_messages`: a reply as plain-text messages, the file attached, the nonce, who is pinged."""

from __future__ import annotations

import dataclasses

from core.commands.messages import Reply
from core.commands.text_messages import content, once_key, pinged
from core.delivery.envelope import Once
from core.redaction import Redactor
from core.render import format_of

HELP = Reply(kind="help", data={"commands": [{"name": "run", "usage": "run <name>", "summary": "start"}]})


def test_a_short_reply_is_its_chunks_and_no_file() -> None:
    said = content(HELP, format_of("discord"), Redactor(()), attach=True, attach_over=8000)
    assert said.file is None and said.chunks == said.every and said.chunks


def test_a_long_reply_is_its_first_chunk_with_the_whole_text_attached_when_it_may() -> None:
    said = content(HELP, format_of("discord"), Redactor(()), attach=True, attach_over=1)
    assert said.file is not None and said.file[0] == "help.txt" and len(said.chunks) == 1
    unfiled = content(HELP, format_of("discord"), Redactor(()), attach=False, attach_over=1)
    assert unfiled.file is None and unfiled.chunks == said.chunks


def test_the_nonce_is_the_delivery_key_hashed_when_too_long_and_pings_are_the_platform_s() -> None:
    assert once_key(HELP, 25) is None
    assert once_key(HELP.sent(once=Once("outbox:12")), 25) == "outbox:12"
    assert len(once_key(HELP.sent(once=Once("outbox:" + "9" * 40)), 25) or "") == 25
    pings = dataclasses.replace(HELP, pings=("discord:42", "slack:U1", "discord:"))
    assert pinged(pings, "discord") == ["42"]
