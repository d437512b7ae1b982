"""The one JSON encoder of Baton's canonical form: sorted keys, no insignificant whitespace,
UTF-8 text (no `\\u` escapes), no NaN or Infinity. Standard library only, so that the
sandboxed tool runner keys tools (`core/engine/tool_identity.py`) without importing the
workflow model that `core/workflows/args.py` (`canonical_json`, with its errors) needs."""

from __future__ import annotations

import json

#: what `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`
#: builds on every call, built once
ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
