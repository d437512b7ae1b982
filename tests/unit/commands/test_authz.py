from __future__ import annotations

import pytest

from core.commands.authz import (
    may_approve,
    may_run,
    may_use,
    may_view,
    require_approve,
    require_owner,
    require_run,
    user_id,
)
from core.config import Access
from core.errors import PermissionDenied
from tests.unit.commands.samples import make_run

TEAM = Access(
    admins=["slack:UADMIN"],
    run={"release-notes": ["slack:U1", "slack:U2"], "*": ["slack:UALL"]},
    approve={"release-notes": ["slack:U2", "slack:U1"]},
    approver_not_requester=True,
)
RUN = make_run(requester="slack:U1")


def test_user_id_is_platform_qualified() -> None:
    assert user_id("discord", "80351110224678912") == "discord:80351110224678912"


def test_default_access_lets_everyone_run_and_approve() -> None:
    assert may_run(Access(), "console:ana", "anything")
    assert may_approve(Access(), "console:ana", RUN)


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
