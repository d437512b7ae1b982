"""Who may do what, by immutable user id `f"{platform}:{user}"` (never a display name).

Pure checks over `core.config.Access`. `require_*` raise `PermissionDenied` with one line of
cause and one of next step, naming people by id and listing those ids in `users` (the reply
renders them as the platform's mentions; the audit keeps the ids); the handler audits every
refusal.

Wherever a user id is listed, `group:<name>` stands for the members of that group and `*`
for anyone (`members`, `listed`). Access fails closed: what is not granted is refused.

- run W: `access.run[W]` or `access.run["*"]` lists the user;
- approve a gate of W: the node's `approvers:` when set, else `access.approve[W|*]`;
  with `approver_not_requester`, the run's requester may not decide it, admins included;
- their own runs: a requester may resume, abandon, cancel, resolve and invalidate them (on
  any of their accounts BATON_ACCESS's `people` lists);
- admins may do everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.commands.model import SPECS
from core.config import ANYONE, GROUP_PREFIX, Access
from core.errors import PermissionDenied, WorkflowError
from core.store.records import Run
from core.workflows.catalog import Catalog


def user_id(platform: str, user: str) -> str:
    return f"{platform}:{user}"


def members(access: Access, ids: Iterable[str]) -> frozenset[str]:
    """`ids` with each `group:<name>` replaced by the group's user ids (`*` stays: anyone).
    A group `access` does not define stands for nobody."""
    found: set[str] = set()
    for entry in ids:
        if entry.startswith(GROUP_PREFIX):
            found.update(access.groups.get(entry.removeprefix(GROUP_PREFIX), ()))
        else:
            found.add(entry)
    return frozenset(found)


def listed(access: Access, uid: str, ids: Iterable[str]) -> bool:
    """Whether `ids` (user ids, `group:<name>`, `*`) include the user `uid`."""
    everyone = members(access, ids)
    return ANYONE in everyone or uid in everyone


def is_admin(access: Access, uid: str) -> bool:
    return uid in members(access, access.admins)


def may_run(access: Access, uid: str, workflow: str) -> bool:
    if is_admin(access, uid):
        return True
    return listed(access, uid, [*access.run.get(workflow, ()), *access.run.get(ANYONE, ())])


def requested(access: Access, uid: str, run: Run) -> bool:
    """Whether `uid`'s person requested `run`, with this account or another of theirs."""
    return access.person(uid) == access.person(run.requester)


def may_approve(
    access: Access, uid: str, run: Run, node_approvers: Sequence[str] | None = None
) -> bool:
    if access.approver_not_requester and requested(access, uid, run):
        return False  # four eyes: admins included, whichever of their accounts they use
    if is_admin(access, uid):
        return True
    if node_approvers is not None:
        return listed(access, uid, node_approvers)
    return listed(access, uid, [*access.approve.get(run.workflow, ()), *access.approve.get(ANYONE, ())])


def may_approve_any(access: Access, uid: str) -> bool:
    return is_admin(access, uid) or any(listed(access, uid, ids) for ids in access.approve.values())


def may_run_any(access: Access, uid: str) -> bool:
    return is_admin(access, uid) or any(listed(access, uid, ids) for ids in access.run.values())


def owns(access: Access, uid: str, run: Run) -> bool:
    """Admins, and the run's requester on any of their accounts `people` lists."""
    return is_admin(access, uid) or requested(access, uid, run)


def may_view(access: Access, uid: str, run: Run, gate_approvers: Iterable[str] = ()) -> bool:
    """Inspection (status, plan, args, audit): the requester, admins, anyone who may run or
    approve that workflow, and whoever a gate of it names in its `approvers:` (`gate_approvers`):
    who may decide a gate may read what they decide."""
    return (
        owns(access, uid, run)
        or may_run(access, uid, run.workflow)
        or may_approve(access, uid, run.evolve(requester=""))
        or listed(access, uid, gate_approvers)
    )


def gate_approvers(catalog: Catalog, run: Run) -> list[str]:
    """Everyone the approval nodes of `run`'s workflow name in `approvers:` or escalate to
    (none when the workflow is gone or does not load), for `may_view`."""
    try:
        workflow = catalog.get(run.workflow)
    except WorkflowError:
        return []
    named: list[str] = []
    for node in workflow.nodes:
        escalation = node.approval.escalate if node.approval is not None else None
        named += [*(node.approvers or ()), *(escalation.to if escalation is not None else ())]
    return named


def may_view_workflow(access: Access, uid: str, workflow: str) -> bool:
    """Whether the user may view every run of `workflow` (`*`: of every workflow): admins, and
    whoever may run or approve it (what a subscription to its runs rests on)."""
    if is_admin(access, uid):
        return True
    approvers = [*access.approve.get(workflow, ()), *access.approve.get(ANYONE, ())]
    return may_run(access, uid, workflow) or listed(access, uid, approvers)


def may_use(access: Access, uid: str, sub: str) -> bool:
    """Whether `help` shows subcommand `sub` to this user."""
    group = SPECS[sub].group
    if group == "run":
        return may_run_any(access, uid)
    if group == "approve":
        return may_approve_any(access, uid)
    if group == "own":
        return may_run_any(access, uid)
    return True


def require_run(access: Access, uid: str, workflow: str) -> None:
    if not may_run(access, uid, workflow):
        raise PermissionDenied(f"{uid} may not run `{workflow}`.", users=[uid])


def require_approve(access: Access, uid: str, run: Run, node_approvers: Sequence[str] | None) -> None:
    if may_approve(access, uid, run, node_approvers):
        return
    if access.approver_not_requester and requested(access, uid, run):
        raise PermissionDenied(
            f"{uid} requested run {run.id} and so may not approve its gate.", users=[uid],
            hint="Ask another approver of this workflow to decide it.",
        )
    raise PermissionDenied(
        f"Sorry, {uid} is not an approver of `{run.workflow}`.", users=[uid],
        hint="Ask one of its approvers (or a Baton admin) to decide this gate.",
    )


def require_owner(access: Access, uid: str, run: Run, action: str) -> None:
    if not owns(access, uid, run):
        raise PermissionDenied(
            f"{uid} may not {action} run {run.id}: it belongs to {run.requester}.",
            users=[uid, run.requester],
            hint="Ask its requester or a Baton admin to do it.",
        )


def require_view(access: Access, uid: str, run: Run, gate_approvers: Iterable[str] = ()) -> None:
    if not may_view(access, uid, run, gate_approvers):
        raise PermissionDenied(f"{uid} may not inspect run {run.id} of `{run.workflow}`.", users=[uid])
