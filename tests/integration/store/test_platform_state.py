"""`put_state` / `get_state` / `forget_state`: small values chat adapters keep across
restarts, per platform, until housekeeping prunes the old ones."""

from __future__ import annotations

from core.store.port import Store
from core.store.repository import SqlStore
from tests.integration.store.conftest import Clock


def test_a_value_is_kept_replaced_and_scoped_by_platform(store: Store) -> None:
    assert store.state.get_state("slack", "progress:r1") is None
    store.state.put_state("slack", "progress:r1", "C1 1700000000.000100")
    store.state.put_state("discord", "progress:r1", "elsewhere")
    store.state.put_state("slack", "progress:r1", "C1 1700000000.000200")  # re-posted: replaced

    assert store.state.get_state("slack", "progress:r1") == "C1 1700000000.000200"
    assert store.state.get_state("discord", "progress:r1") == "elsewhere"


def test_keep_state_writes_once_and_outlives_housekeeping(store: Store, clock: Clock) -> None:
    assert store.state.keep_state("baton", "pages:key", "first") == "first"
    assert store.state.keep_state(
        "baton", "pages:key", "second"
    ) == "first"  # a racing replica gets the first
    store.state.put_state("slack", "ref:old", "x")
    clock.advance(3600)
    assert store.state.forget_state(before=clock.now) == 1  # Baton's own value is never dropped
    assert store.state.get_state("baton", "pages:key") == "first"


def test_values_survive_a_new_store_on_the_same_database(database_url: str) -> None:
    long_command = 'run deploy --force "' + "x" * 5000 + '"'
    with SqlStore(database_url) as first:
        first.migrate()
        first.state.put_state("slack", "ref:abc", long_command)
    with SqlStore(database_url) as second:  # another process, after a restart
        assert second.state.get_state("slack", "ref:abc") == long_command


def test_forget_state_drops_values_last_written_before_the_cut_off(store: Store, clock: Clock) -> None:
    store.state.put_state("slack", "ref:old", "run deploy --force 'long'")
    store.state.put_state("slack", "message:progress:r1", "C1 1.0")
    store.state.put_state("discord", "message:progress:r1", "10 20")
    clock.advance(3600)
    store.state.put_state("slack", "message:progress:r1", "C1 2.0")  # written again: its time moves
    store.state.put_state("slack", "ref:new", "run deploy --force 'newer'")

    assert store.state.forget_state(before=clock.now - 60) == 2
    assert store.state.get_state("slack", "ref:old") is None
    assert store.state.get_state("discord", "message:progress:r1") is None
    assert store.state.get_state("slack", "message:progress:r1") == "C1 2.0"
    assert store.state.get_state("slack", "ref:new") == "run deploy --force 'newer'"
    assert store.state.forget_state(before=clock.now - 60) == 0  # idempotent: a peer's pass finds nothing
