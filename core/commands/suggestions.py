"""What to offer while a command is typed (Discord's autocomplete): workflow names the user may
run, and run ids of the conversation the user may see, narrowed to what the command acts on.

Pure functions over the catalog's entries and runs already read; `Handler.suggest_workflows` /
`suggest_runs` read them. A suggestion is `(value, label)`: the value is what the option gets,
the label what the person sees (at most `LABEL_LIMIT` characters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.commands import authz
from core.config import Access
from core.store.records import Run, RunStatus
from core.workflows.catalog import CatalogEntry

LIMIT = 25  # Discord shows at most 25 choices
LABEL_LIMIT = 100
UNFINISHED = (RunStatus.FAILED, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)
#: The runs each subcommand acts on (absent: any run the user may see).
TARGETS: dict[str, tuple[RunStatus, ...]] = {
    "resume": UNFINISHED,
    "approve": (RunStatus.PAUSED,),
    "reject": (RunStatus.PAUSED,),
    "abandon": (*UNFINISHED, RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED),
    "cancel": (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED),
    "resolve": (RunStatus.NEEDS_ATTENTION,),
    "invalidate": (*UNFINISHED, RunStatus.COMPLETED, RunStatus.CANCELLED),
}

Suggestion = tuple[str, str]


def _label(text: str) -> str:
    return text if len(text) <= LABEL_LIMIT else text[: LABEL_LIMIT - 1] + "…"


def workflows(entries: Iterable[CatalogEntry], access: Access, uid: str, typed: str) -> list[Suggestion]:
    """Workflows `uid` may run whose name starts with (then contains) `typed`; broken files left out."""
    typed = typed.strip().lower()
    names = sorted((e for e in entries if e.workflow is not None and e.error is None
                    and authz.may_run(access, uid, e.name)), key=lambda e: e.name)
    ranked = [e for e in names if e.name.lower().startswith(typed)]
    ranked += [e for e in names if typed in e.name.lower() and e not in ranked]
    return [(e.name, _label(f"{e.name} — {e.workflow.description}" if e.workflow and e.workflow.description
                            else e.name)) for e in ranked[:LIMIT]]


def runs(recent: Sequence[Run], access: Access, uid: str, typed: str, command: str) -> list[Suggestion]:
    """Runs among `recent` (newest first) that `uid` may see and `command` acts on, whose id
    starts with `typed` (or whose workflow name contains it)."""
    typed = typed.strip().lower()
    wanted = TARGETS.get(command)
    found = [
        r for r in recent
        if (wanted is None or r.status in wanted) and authz.may_view(access, uid, r)
        and (r.id.startswith(typed) or typed in r.workflow.lower())
    ]
    return [(r.id, _label(f"{r.id} · {r.workflow} · {r.status.value}")) for r in found[:LIMIT]]
