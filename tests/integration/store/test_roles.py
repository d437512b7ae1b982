"""The store's roles as attributes (`port.Roles`) on every store: each offers every method of its
protocol, the store itself none of them (but units of work, `Transactions`, which span roles), and
what one role writes the store's other roles read back, since they share one database."""

from __future__ import annotations

import inspect
import typing

import pytest

from core.store import port
from core.store.port import Store
from tests.factories import create_run

ROLES = {name: typing.get_type_hints(prop.fget, vars(port))["return"]
         for name, prop in vars(port.Roles).items() if isinstance(prop, property)}  # fmt: skip


def test_the_roles_are_the_protocols_of_the_store() -> None:
    assert {role.__name__ for role in ROLES.values()} == {
        "Blobs", "Runs", "Leases", "Journal", "Gates", "Ballots", "Events", "PlatformState", "Deliveries",
        "Retention", "Schedules", "Subscriptions", "Views", "Transactions"}
    # the whole store is its roles, and units of work across them: no role's methods flat
    assert [role for role in ROLES.values() if role in port.Store.__mro__] == [port.Transactions]


@pytest.mark.parametrize("name", sorted(ROLES))
def test_each_role_offers_every_method_of_its_protocol(store: Store, name: str) -> None:
    role = getattr(store, name)
    methods = [m for m, f in vars(ROLES[name]).items() if inspect.isfunction(f) and not m.startswith("_")]
    assert methods
    missing = [m for m in methods if not callable(getattr(role, m, None))]
    assert missing == []


def test_the_store_offers_no_role_method_itself(store: Store) -> None:
    methods = [m for name, role in ROLES.items() if name != "transactions"
               for m, f in vars(role).items() if inspect.isfunction(f) and not m.startswith("_")]  # fmt: skip
    assert len(methods) > 80
    flat = [m for m in methods if hasattr(store, m)]
    assert flat == []


def test_what_one_role_writes_the_others_read(store: Store) -> None:
    digest = store.blobs.put_blob(b"shared")
    assert store.blobs.get_blob(digest) == b"shared"
    run = create_run(store, workflow="deploy", args_digest=digest, requester="u1", platform="slack",
                     conversation="C1", thread=None)  # fmt: skip
    assert store.runs.get_run(run.id) == run
    assert [r.id for r in store.runs.recent_runs(platform="slack")] == [run.id]
    gate = store.gates.open_gate(run.id, "approve", "Ship it?")
    assert store.views.gate_and_args(store.runs.get_run(run.id))[1] == b"shared"
    assert store.gates.get_gate(run.id, "approve") == gate
    store.events.audit(actor="u1", action="looked", run_id=run.id)
    assert [e.action for e in store.events.audit_log(run.id)] == ["looked"]
    store.state.put_state("slack", "k", "v")
    assert store.state.get_state("slack", "k") == "v"
    store.subscribers.subscribe("slack", "C1", "deploy", ["failed"], by="u1")
    assert [s.event for s in store.subscribers.subscriptions(workflow="deploy")] == ["failed"]
    assert store.schedules.list_schedules() == []
    assert store.retention.pin_run(run.id, "u1")
    assert store.retention.is_pinned(run.id)
    with store.transactions.transaction() as tx:
        tx.audit(actor="u2", action="written", run_id=run.id)
    assert [e.action for e in store.events.audit_log(run.id)] == ["looked", "written"]
    assert store.outbox.undelivered() == []
    assert store.steps.lineage(run.id) == [run.id]
