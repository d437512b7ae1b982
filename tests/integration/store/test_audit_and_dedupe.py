"""The audit trail and once-only processing of incoming platform events."""

from __future__ import annotations

from core.store.port import Store
from tests.integration.store.conftest import Clock, MakeRun


def test_audit_log_of_a_run_in_order(store: Store, make_run: MakeRun, clock: Clock) -> None:
    run = make_run()
    other = make_run()
    store.events.audit(actor="slack:U1", action="run", run_id=run.id, details={"args": "args:3f9a1c2b"})
    store.events.audit(actor="slack:U2", action="approve.denied", run_id=run.id, details={"gate": "review"})
    store.events.audit(actor="slack:U3", action="abandon", run_id=other.id)
    store.events.audit(actor="console:ana", action="login")

    events = store.events.audit_log(run.id)
    assert [(e.actor, e.action, e.details) for e in events] == [
        ("slack:U1", "run", {"args": "args:3f9a1c2b"}),
        ("slack:U2", "approve.denied", {"gate": "review"}),
    ]
    assert events[0].id < events[1].id and events[0].at < events[1].at
    assert all(e.run_id == run.id and e.at >= clock.now for e in events)
    assert [e.details for e in store.events.audit_log(other.id)] == [{}]


def test_claim_event_is_true_once_per_platform_and_id(store: Store) -> None:
    assert store.events.claim_event("slack", "Ev01") is True
    assert store.events.claim_event("slack", "Ev01") is False
    assert store.events.claim_event("discord", "Ev01") is True
    assert store.events.claim_event("slack", "Ev02") is True


def test_forget_events_drops_old_ids(store: Store, clock: Clock) -> None:
    store.events.claim_event("slack", "old")
    clock.advance(3600)
    store.events.claim_event("slack", "new")
    assert store.events.forget_events(before=clock.now - 60) == 1
    assert store.events.claim_event("slack", "old") is True
    assert store.events.claim_event("slack", "new") is False
