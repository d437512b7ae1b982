"""What a workflow file may ask of the bot: the load-time limits (settings, documented in
README.md's settings table).

    max_file_bytes   BATON_WORKFLOW_MAX_BYTES     a larger file is refused unread
    max_alias_nodes  BATON_YAML_MAX_ALIAS_NODES   nodes YAML aliases may add (billion laughs)
    max_timeout      BATON_MAX_STEP_TIMEOUT       the largest `timeout:` a step may declare
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: nanoseconds within which a file just written may be written again without its stamp (mtime,
#: size) changing: a file younger than this is read again next time, never remembered by its
#: stamp (git's "racily clean" rule; the catalog, `files:` digests, tool module digests)
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class LoadLimits:
    max_file_bytes: int = 1_000_000
    max_alias_nodes: int = 10_000
    max_timeout: float = 86_400.0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while a definition is built. Loading a 5,000-node
    file allocates a few hundred thousand objects, none of them in a cycle; left on, the
    collector walks the young (and every so often the whole) heap hundreds of times on
    the way, which was half of the load's time. Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
