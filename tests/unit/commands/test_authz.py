from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from core.commands import replies
from core.commands.authz import (
    is_admin,
    listed,
    may_approve,
    may_run,
    may_use,
    may_view,
    members,
    require_approve,
    require_owner,
    require_run,
    require_view,
    user_id,
)
from core.config import Access
from core.errors import PermissionDenied
from core.redaction import Redactor
from core.render import render
from core.store.records import Run
from tests.unit.commands.samples import make_run

PLAIN = Redactor(())  # these tests are about templates; redaction has its own

TEAM = Access(
    admins=["slack:UADMIN"],
    run={"release-notes": ["slack:U1", "slack:U2"], "*": ["slack:UALL"]},
    approve={"release-notes": ["slack:U2", "slack:U1"]},
    approver_not_requester=True,
)
RUN = make_run(requester="slack:U1")


def test_user_id_is_platform_qualified() -> None:
    assert user_id("discord", "80351110224678912") == "discord:80351110224678912"


def test_without_baton_access_everyone_may_run_and_approve() -> None:
    assert may_run(Access.everyone(), "console:ana", "anything")
    assert may_approve(Access.everyone(), "console:ana", RUN)


def test_an_access_grants_nothing_it_does_not_name() -> None:
    only_run = Access(run={"deploy": ["console:ana"]})
    assert may_run(only_run, "console:ana", "deploy")
    assert not may_run(only_run, "console:bob", "deploy")
    assert not may_run(only_run, "console:ana", "hello")
    assert not may_approve(only_run, "console:bob", RUN)  # no `approve` section: nobody
    assert not may_approve(only_run, "console:ana", RUN)
    assert may_approve(Access(admins=["console:root"]), "console:root", RUN)  # but admins


def test_groups_stand_for_their_members_wherever_an_id_goes() -> None:
    access = Access(
        groups={"sre": ["slack:U1", "discord:2"], "leads": ["console:ana"]},
        admins=["group:leads"],
        run={"deploy": ["group:sre"]},
        approve={"*": ["group:sre", "slack:U9"]},
    )
    assert members(access, ["group:sre", "slack:U9", "*"]) == {"slack:U1", "discord:2", "slack:U9", "*"}
    assert may_run(access, "discord:2", "deploy") and not may_run(access, "slack:U9", "deploy")
    assert may_approve(access, "slack:U1", RUN.evolve(requester="console:x"))
    assert may_approve(access, "slack:U9", RUN.evolve(requester="console:x"))
    assert is_admin(access, "console:ana") and not is_admin(access, "slack:U1")
    assert not listed(access, "slack:U1", ["group:undefined"])  # an unknown group is nobody
    assert may_approve(access, "slack:U1", RUN, node_approvers=["group:sre"])
    assert not may_approve(access, "slack:U9", RUN, node_approvers=["group:sre"])


def test_approver_not_requester_binds_admins_too() -> None:
    access = Access(admins=["slack:U1"], approve={"*": ["*"]}, approver_not_requester=True)
    assert not may_approve(access, "slack:U1", RUN)  # RUN was requested by slack:U1
    with pytest.raises(PermissionDenied, match="requested run"):
        require_approve(access, "slack:U1", RUN, None)
    assert may_approve(access, "slack:U2", RUN)


@pytest.mark.parametrize(
    ("value", "wrong"),
    [
        ({"admin": ["console:ana"]}, "admin"),
        ({"runn": {"*": ["console:ana"]}}, "runn"),
        ({"admins": "console:ana"}, "admins"),
        ({"run": ["console:ana"]}, "run"),
        ({"run": {"deploy": "console:ana"}}, "deploy"),
        ({"approve": {"*": ["slack:ana"]}}, "slack:ana"),  # a display name, not a Slack id
        ({"approve": {"*": ["discord:ana"]}}, "discord:ana"),
        ({"approve": {"*": ["ana"]}}, "ana"),
        ({"run": {"*": ["group:sre"]}}, "group:sre"),  # no such group
        ({"groups": {"sre": ["group:ops"]}}, "group:ops"),  # groups hold people only
        ({"groups": {"SRE": ["slack:U1"]}}, "SRE"),
        ({"admins": ["*"]}, "*"),
        ({"approver_not_requester": "yes"}, "approver_not_requester"),
        ({"run": {"bad name!": ["*"]}}, "bad name!"),
    ],
)
def test_a_malformed_access_is_refused(value: dict[str, object], wrong: str) -> None:
    with pytest.raises(ValidationError) as info:
        Access.model_validate(value)
    assert wrong in str(info.value)


def test_run_by_workflow_wildcard_and_admin() -> None:
    assert may_run(TEAM, "slack:U1", "release-notes")
    assert not may_run(TEAM, "slack:U1", "deploy")
    assert may_run(TEAM, "slack:UALL", "deploy")
    assert may_run(TEAM, "slack:UADMIN", "deploy")
    assert not may_run(TEAM, "discord:U1", "release-notes")  # same id, other platform
    with pytest.raises(PermissionDenied, match="may not run `deploy`"):
        require_run(TEAM, "slack:U1", "deploy")


def test_approver_not_requester_and_node_override() -> None:
    assert may_approve(TEAM, "slack:U2", RUN)
    assert not may_approve(TEAM, "slack:U1", RUN)  # the requester
    assert may_approve(TEAM, "slack:UADMIN", RUN)
    assert not may_approve(TEAM, "slack:U2", RUN, node_approvers=["slack:U9"])
    assert may_approve(TEAM, "slack:U9", RUN, node_approvers=["slack:U9"])
    with pytest.raises(PermissionDenied, match="requested run") as info:
        require_approve(TEAM, "slack:U1", RUN, None)
    assert "another approver" in info.value.hint
    with pytest.raises(PermissionDenied, match="not an approver"):
        require_approve(TEAM, "slack:UALL", RUN, None)


def test_owners_and_admins_act_on_runs() -> None:
    require_owner(TEAM, "slack:U1", RUN, "abandon")
    require_owner(TEAM, "slack:UADMIN", RUN, "abandon")
    with pytest.raises(PermissionDenied, match="belongs to slack:U1"):
        require_owner(TEAM, "slack:U2", RUN, "abandon")


def test_view_and_help_visibility() -> None:
    assert may_view(TEAM, "slack:U2", RUN)
    assert not may_view(Access(run={}, approve={}), "slack:U7", RUN)
    nobody = Access(run={}, approve={})
    assert not may_use(nobody, "slack:U7", "run")
    assert not may_use(nobody, "slack:U7", "approve")
    assert may_use(nobody, "slack:U7", "status")
    assert may_use(TEAM, "slack:U2", "approve")


def _refusal(platform: str, check: Callable[[Access, str, Run], None]) -> tuple[PermissionDenied, str]:
    """The refusal `check` raises for Mallory on a run of Ana, and its text on `platform`."""
    ana, mallory = {"slack": ("slack:U0ANA", "slack:U0MAL"),
                    "discord": ("discord:80351110224678912", "discord:80351110224678999"),
                    "console": ("console:ana", "console:mallory")}[platform]
    access = Access(run={"release-notes": [ana]}, approve={"release-notes": [ana]})
    run = make_run(platform=platform, requester=ana)
    with pytest.raises(PermissionDenied) as info:
        check(access, mallory, run)
    [text] = render(replies.error(info.value, run), platform, PLAIN)
    return info.value, text


REFUSALS: dict[str, Callable[[Access, str, Run], None]] = {
    "run": lambda access, uid, run: require_run(access, uid, run.workflow),
    "approve": lambda access, uid, run: require_approve(access, uid, run, None),
    "own": lambda access, uid, run: require_owner(access, uid, run, "abandon"),
    "view": require_view,
}

SHOWN = {  # platform: (Mallory as shown, Ana as shown)
    "slack": ("U0MAL", "U0ANA"),  # no name known here: the bare id, never a ping
    "discord": ("<@80351110224678999>", "<@80351110224678912>"),
    "console": ("mallory", "ana"),
}


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
@pytest.mark.parametrize("platform", sorted(SHOWN))
def test_a_refusal_names_people_as_the_platform_shows_them(platform: str, refusal: str) -> None:
    exc, text = _refusal(platform, REFUSALS[refusal])
    mallory, ana = SHOWN[platform]
    first = text.splitlines()[0]
    assert first.startswith(f"⚠️ {'Sorry, ' if refusal == 'approve' else ''}{mallory} ")
    assert f"{platform}:" not in text  # no raw id left
    assert (f"it belongs to {ana}." in first) is (refusal == "own")
    assert exc.message.startswith(("Sorry, " if refusal == "approve" else "") + f"{platform}:")  # ids


def test_a_refusal_keeps_the_immutable_ids_in_its_message() -> None:
    """The message (logged and audited as the refusal's reason) names ids, not mentions."""
    exc, _ = _refusal("slack", REFUSALS["own"])
    assert exc.message == "slack:U0MAL may not abandon run r-0123456789abcdef: it belongs to slack:U0ANA."
    assert exc.users == ("slack:U0MAL", "slack:U0ANA")


def test_an_id_that_prefixes_another_is_not_cut_out_of_it() -> None:
    parts = replies.message_parts("slack:U1 may not abandon run r1: it belongs to slack:U12.",
                                  ["slack:U1", "slack:U12"])
    assert [p.get("user") for p in parts if "user" in p] == ["slack:U1", "slack:U12"]
    assert "".join(p.get("text", p.get("user", "")) for p in parts) == (
        "slack:U1 may not abandon run r1: it belongs to slack:U12.")


def test_a_discord_refusal_shows_what_looks_like_a_mention_without_zero_width_spaces() -> None:
    """`<@id>` shows the person; the adapter posts with AllowedMentions.none() (the e2e fake
    refuses any other), so nothing pings: text that looks like a mention is shown as written."""
    exc = PermissionDenied("discord:<@&1> may not run `@everyone`.", users=["discord:<@&1>"])
    [text] = render(replies.error(exc), "discord", PLAIN)
    assert "`@everyone`" in text and "\u200b" not in text
