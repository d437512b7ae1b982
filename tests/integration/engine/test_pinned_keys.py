"""Cache keys are stable across releases: the keys of a few steps, computed by the engine
against a real database, are pinned here. A key that changed would make every stored result
miss after an upgrade (and a resume run completed steps again): change one only on purpose,
with `ENGINE_VERSION`. What the journal stores beside the key components (why a step ran, why
it was skipped, a map's item count) keeps its stored names, so entries recorded before and
after read alike."""

from __future__ import annotations

import json

import sqlalchemy as sa

from core.store.records import RunStatus
from tests.integration.engine.harness import Harness

PINNED = """
name: pinned
nodes:
  - id: hello
    bash: echo hello {{ inputs.who }}
    replay: pure
  - id: shout
    depends_on: [hello]
    bash: echo "{{ nodes.hello.output }}!"
    replay: pure
  - id: never
    depends_on: [hello]
    when: "{{ inputs.who == 'nobody' }}"
    bash: echo never
  - id: each
    depends_on: [hello]
    map: {items: ["a", "b"], as: x}
    bash: echo item {{ x }}
    replay: pure
"""

KEYS = {
    "hello": "48df678a500352dddd4ffc70c7764f12dc406edf7676b317b576716ddf9d8252",
    "shout": "6f782625a3ca8a06d3de4ff30d38bd48ba9a7fd118ab4effdd917fbceb5aaa56",
    "never": "6908f024af8eb090fac862c9fba4de42bb7c64f367e6be88f98bb89c64763d69",
    "each": "c38a0fdd2b5d16a23472b780323d7989cdab8ee2ee642b094135dbb4faba5ebf",
    "each[0]": "ee0e36bdf818eb8eba388978dc7eee929565a4538a7eb0f8c136ae1103dc6ccb",
    "each[1]": "85d05fc66e09ee8dc4dd9f4d17cc893a43eba71481d780a8b824fa0a266cfbd5",
}
#: what each entry stores beside its key components (never hashed)
RAN = {"_identity": 1, "_reason": "no earlier result"}
NOTES = {
    "hello": RAN,
    "shout": RAN,
    "never": {**RAN, "_skipped": "`when: {{ inputs.who == 'nobody' }}` is false"},
    "each": RAN,
    "each[0]": {**RAN, "_of": 2},
    "each[1]": {**RAN, "_of": 2},
}


def _stored(url: str, run_id: str) -> dict[str, dict[str, object]]:
    """The journal's `components` column as stored, by node."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as db:
            query = sa.text("SELECT node_id, components FROM journal WHERE run_id = :r")
            rows = db.execute(query, {"r": run_id})
            return {node: json.loads(c) if isinstance(c, str) else c for node, c in rows}
    finally:
        engine.dispose()


async def test_the_keys_of_known_steps_are_pinned_and_their_notes_keep_their_stored_names(
    db_harness: Harness, migrated_database_url: str
) -> None:
    h = db_harness
    h.write("pinned.yaml", PINNED)
    run = await h.run("pinned", {"who": "world"})
    assert run.status is RunStatus.COMPLETED, run.reason
    keys = {e.node_id: e.cache_key for e in h.entries(run.id)}
    assert keys == KEYS
    stored = _stored(migrated_database_url, run.id)
    assert {n: {k: v for k, v in c.items() if k.startswith("_")} for n, c in stored.items()} == NOTES
    entries = {e.node_id: e for e in h.entries(run.id)}  # read back: the notes, typed
    assert entries["never"].notes.skipped == "`when: {{ inputs.who == 'nobody' }}` is false"
    assert (entries["each[1]"].notes.items, entries["each[1]"].notes.reason) == (2, "no earlier result")
    assert all(e.notes.keyed_identity for e in entries.values())
    assert not [k for e in entries.values() for k in e.components if k.startswith("_")]  # key components only
    # the same steps in a run resumed from it: the same keys, every result re-used (the map
    # node whole), each copy stored as its original was (`_tokens` only where one spent tokens)
    again = await h.run("pinned", {"who": "world"}, resume_from=run.id)
    nodes = ("hello", "shout", "never", "each")
    assert {e.node_id: e.cache_key for e in h.entries(again.id)} == {n: KEYS[n] for n in nodes}
    assert all(e.cached_from == run.id for e in h.entries(again.id))
    copies = _stored(migrated_database_url, again.id)
    assert {n: {k: v for k, v in c.items() if k.startswith("_")} for n, c in copies.items()} == {
        n: NOTES[n] for n in nodes
    }
