"""Who may do what, by immutable user id `f"{platform}:{user}"` (never a display name).

Pure checks over `core.config.Access`. `require_*` raise `PermissionDenied` with one line of
cause and one of next step, naming people by id and listing those ids in `users` (the reply
renders them as the platform's mentions; the audit keeps the ids); the handler audits every
refusal.

- run W: `access.run[W]` or `access.run["*"]` lists the user (or `*`);
- approve a gate of W: the node's `approvers:` when set, else `access.approve[W|*]`;
  with `approver_not_requester`, the run's requester may not approve it;
- their own runs: a requester may resume, abandon, cancel, resolve and invalidate them;
- admins may do everything (including deciding gates of runs they requested).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.commands.model import SPECS
from core.config import Access
from core.errors import PermissionDenied
from core.store.records import Run

ANYONE = "*"


def user_id(platform: str, user: str) -> str:
    return f"{platform}:{user}"


def _listed(uid: str, ids: Iterable[str]) -> bool:
    return any(i in (ANYONE, uid) for i in ids)


def is_admin(access: Access, uid: str) -> bool:
    return uid in access.admins


def may_run(access: Access, uid: str, workflow: str) -> bool:
    if is_admin(access, uid):
        return True
    return _listed(uid, access.run.get(workflow, [])) or _listed(uid, access.run.get(ANYONE, []))


def may_approve(
    access: Access, uid: str, run: Run, node_approvers: Sequence[str] | None = None
) -> bool:
    if is_admin(access, uid):
        return True
    if access.approver_not_requester and run.requester == uid:
        return False
    if node_approvers is not None:
        return _listed(uid, node_approvers)
    w = run.workflow
    return _listed(uid, access.approve.get(w, [])) or _listed(uid, access.approve.get(ANYONE, []))


def may_approve_any(access: Access, uid: str) -> bool:
    return is_admin(access, uid) or any(_listed(uid, ids) for ids in access.approve.values())


def may_run_any(access: Access, uid: str) -> bool:
    return is_admin(access, uid) or any(_listed(uid, ids) for ids in access.run.values())


def owns(access: Access, uid: str, run: Run) -> bool:
    return is_admin(access, uid) or run.requester == uid


def may_view(access: Access, uid: str, run: Run) -> bool:
    """Inspection (status, plan, args, audit): the requester, admins, and anyone who may run
    or approve that workflow."""
    return (
        owns(access, uid, run)
        or may_run(access, uid, run.workflow)
        or may_approve(access, uid, run.evolve(requester=""))
    )


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
    if access.approver_not_requester and run.requester == uid and not is_admin(access, uid):
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


def require_view(access: Access, uid: str, run: Run) -> None:
    if not may_view(access, uid, run):
        raise PermissionDenied(f"{uid} may not inspect run {run.id} of `{run.workflow}`.", users=[uid])
