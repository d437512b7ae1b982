"""A keyed unit's round trips on PostgreSQL (issue 34): its statements are pipelined
(`core/store/admission_pg.py`), so a run created and admitted costs two round trips (the lock
and admission's read; the writes with the COMMIT) and one brought to rest two (the lock, the
writes and the queue's head; the COMMIT), where they cost six and seven sent one by one.

Round trips are counted on the wire: the store connects through a TCP relay that counts each
time the client speaks again after the server answered (PostgreSQL answers a pipeline only at
its flush or Sync, so the statements queued together are one round trip)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from core.engine.events import tell_rest
from core.errors import InvalidTransition, StoreError
from core.store.port import NewRun, Transition
from core.store.records import Concurrency, RunStatus
from core.store.repository import SqlStore
from tests.integration.store.test_admission import keyed

pytestmark = pytest.mark.postgres


class _Relay:
    """127.0.0.1:<port> -> the database's host and port, counting round trips."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.round_trips = 0
        self._answered: dict[int, bool] = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            with self._lock:
                self._answered[id(client)] = True
            threading.Thread(target=self._pump, args=(client, server, id(client), True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, id(client), False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, conn: int, asking: bool) -> None:
        """Copy one direction until either side ends; the other direction's pump may close
        both sockets first (a connection ending), which ends this one too."""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if data:
                with self._lock:
                    if asking and self._answered[conn]:
                        self.round_trips += 1
                    self._answered[conn] = not asking
                try:
                    sink.sendall(data)
                    continue
                except OSError:  # closed by the other direction's pump
                    pass
            for s in (source, sink):
                s.close()
            return

    def take(self) -> int:
        with self._lock:
            counted, self.round_trips = self.round_trips, 0
        return counted

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def relayed(migrated_postgres_url: str) -> Iterator[tuple[SqlStore, _Relay]]:
    url = sa.engine.make_url(migrated_postgres_url)
    relay = _Relay(url.host or "127.0.0.1", url.port or 5432)
    store = SqlStore(url.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False))
    try:
        yield store, relay
    finally:
        store.close()
        relay.close()


def _create(store: SqlStore, digest: str, policy: Concurrency | None) -> Any:
    with store.transaction() as tx:  # Engine.start_run's unit
        run = tx.create_run(NewRun(workflow="deploy", platform="slack", conversation="C1", thread=None,
                                   requester="slack:U1", args_digest=digest, status=RunStatus.RUNNING,
                                   lease_owner="test", lease_seconds=600, concurrency=policy))  # fmt: skip
        tx.audit(actor="slack:U1", action="start", run_id=run.id, details={"workflow": "deploy"})
        made = tx.created(run.id)
    return made.value


def _rest(store: SqlStore, run: Any) -> Any:
    with store.transaction() as tx:  # Executions._drive's unit at rest
        done = tx.transition(Transition(run.id, RunStatus.COMPLETED, actor="baton",
                                        expected_version=run.version,
                                        allowed_from=[RunStatus.RUNNING]))  # fmt: skip
        tell_rest(tx, run.id, RunStatus.COMPLETED, reason=None)
    return done.value


def test_a_keyed_run_costs_two_round_trips_to_create_and_two_to_rest(
    relayed: tuple[SqlStore, _Relay],
) -> None:
    store, relay = relayed
    digest = store.blobs.put_blob(b"{}")
    policy = keyed(limit=2)
    for warm in (None, policy):  # connections opened (start-up and authentication are not counted)
        _rest(store, _create(store, digest, warm))
    relay.take()

    plain = _create(store, digest, None)
    plain_created = relay.take()
    _rest(store, plain)
    plain_rested = relay.take()
    run = _create(store, digest, policy)
    created = relay.take()
    done = _rest(store, run)
    rested = relay.take()

    assert (plain_created, plain_rested) == (1, 1)  # one statement each, in autocommit
    assert (created, rested) == (2, 2)
    assert run.status is RunStatus.RUNNING and done.status is RunStatus.COMPLETED
    assert store.runs.get_run(run.id).status is RunStatus.COMPLETED  # committed


def test_a_queued_run_is_admitted_by_the_rest_in_three_round_trips(relayed: tuple[SqlStore, _Relay]) -> None:
    """The rest that admits the head of the queue reads it (with the unit's writes), then the
    key's holders, then sends the admission's writes with the COMMIT: one round trip more than
    a rest with nobody waiting."""
    store, relay = relayed
    digest = store.blobs.put_blob(b"{}")
    policy = keyed(limit=1)
    _rest(store, _create(store, digest, policy))  # warm
    holder = _create(store, digest, policy)
    waiting = _create(store, digest, policy)
    assert waiting.status is RunStatus.QUEUED
    relay.take()

    _rest(store, holder)

    assert relay.take() == 3
    admitted = store.runs.get_run(waiting.id)
    assert admitted.status is RunStatus.RUNNING
    trail = [e.action for e in store.events.audit_since(0) if e.run_id == waiting.id]
    assert "admitted" in trail


def _outbox_of(store: SqlStore, run_id: str) -> int:
    with store.db.single.connect() as conn:
        query = sa.text("SELECT count(*) FROM outbox WHERE run_id = :r")
        return int(conn.execute(query, {"r": run_id}).scalar_one())


def test_a_lost_cas_in_a_pipelined_unit_undoes_all_of_it_and_the_connection_serves_again(
    relayed: tuple[SqlStore, _Relay],
) -> None:
    """The transition's rows are read after the writes queued behind it were sent: the unit
    is still undone as a whole (its outbox row with it), and the connection goes back to the
    pool out of its transaction, in its usual mode."""
    store, relay = relayed
    digest = store.blobs.put_blob(b"{}")
    policy = keyed(limit=2)
    run = _create(store, digest, policy)
    stale = run.evolve(version=run.version + 5)

    with pytest.raises(InvalidTransition, match="changed while you acted on it"):
        _rest(store, stale)

    assert store.runs.get_run(run.id).status is RunStatus.RUNNING
    assert _outbox_of(store, run.id) == 0
    relay.take()
    done = _rest(store, run)  # the pooled connection, again
    assert relay.take() == 2
    assert done.status is RunStatus.COMPLETED and _outbox_of(store, run.id) == 1


def test_a_failing_statement_in_a_pipelined_unit_is_a_store_error_and_rolls_back(
    relayed: tuple[SqlStore, _Relay],
) -> None:
    store, _relay = relayed
    digest = store.blobs.put_blob(b"{}")
    run = _create(store, digest, keyed(limit=2))

    with pytest.raises(StoreError), store.transaction() as tx:
        tx.transition(Transition(run.id, RunStatus.COMPLETED, actor="baton",
                                 allowed_from=[RunStatus.RUNNING]))  # fmt: skip
        tell_rest(tx, run.id, RunStatus.COMPLETED, reason=None)
        tx.journal_note(run_id="nosuchrun", node_id="n", cache_key="k", components={}, error="x")  # FK

    assert store.runs.get_run(run.id).status is RunStatus.RUNNING
    assert _outbox_of(store, run.id) == 0
    assert _rest(store, run).status is RunStatus.COMPLETED
