"""Page links: signed for one user and one run (or conversation), expiring, never extended."""

from __future__ import annotations

import pytest

from adapters.web.links import RUN, RUNS, LinkRefused, PageLinks
from tests.unit.commands.samples import make_run

KEY = b"k" * 32


def links(now: float = 1_700_000_000.0, ttl: float = 3600.0, key: bytes = KEY) -> PageLinks:
    return PageLinks(base_url="https://baton.example.com/", ttl=ttl, key=lambda: key, clock=lambda: now)


def token_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


def test_a_run_link_names_its_user_run_and_deadline_and_nothing_can_be_changed() -> None:
    run = make_run(id="r-1")
    link = links().run_link(run, "slack:U1")
    assert link.url.startswith("https://baton.example.com/r/") and link.expires_at == 1_700_003_600.0
    grant = links().verify(RUN, token_of(link.url))
    assert (grant.uid, grant.run_id, grant.expires_at) == ("slack:U1", "r-1", 1_700_003_600.0)
    token = token_of(link.url)
    payload, signature = token.split(".")
    for changed in (payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + signature,
                    payload + "." + signature[::-1], token + "x", "", "."):
        with pytest.raises(LinkRefused) as refused:
            links().verify(RUN, changed)
        assert not refused.value.expired


def test_another_key_or_kind_refuses_the_link() -> None:
    token = token_of(links().run_link(make_run(), "slack:U1").url)
    with pytest.raises(LinkRefused):
        links(key=b"another key, another replica set").verify(RUN, token)
    with pytest.raises(LinkRefused):
        links().verify(RUNS, token)  # a run link is not a list link
    listing = token_of(links().runs_link("slack", "C1", "slack:U1").url)
    with pytest.raises(LinkRefused):
        links().verify(RUN, listing)
    grant = links().verify(RUNS, listing)
    assert (grant.platform, grant.conversation, grant.run_id) == ("slack", "C1", None)


def test_a_link_expires_and_a_lowered_ttl_shortens_links_already_given() -> None:
    token = token_of(links(ttl=3600).run_link(make_run(id="r-9"), "slack:U1").url)
    links(now=1_700_003_599.0).verify(RUN, token)
    with pytest.raises(LinkRefused) as late:
        links(now=1_700_003_600.0).verify(RUN, token)
    assert late.value.expired and late.value.run_id == "r-9"
    with pytest.raises(LinkRefused) as shortened:
        links(ttl=60).verify(RUN, token)  # made for an hour; the operator now allows a minute
    assert shortened.value.expired


def test_a_link_made_from_a_grant_keeps_its_deadline() -> None:
    maker = links()
    deadline = maker.verify(RUNS, token_of(maker.runs_link("slack", "C1", "slack:U1").url)).expires_at
    later = links(now=1_700_001_000.0)
    derived = later.run_path("r-2", "slack:U1", deadline)
    assert later.verify(RUN, token_of(derived)).expires_at == deadline
