"""Simulated build for the `build-report` workflow.

The step's context arrives as JSON on stdin (`{"inputs": …, "nodes": …, "run": {"id": …}}`);
the report goes to $BATON_ARTIFACTS_DIR/report.json and a
JSON summary to stdout (checked against the node's `output.schema`). Deterministic: the same
inputs give the same bytes, so the step's result is safely cached.
"""

import json
import os
import sys

MATRIX = ["linux-x86_64", "linux-arm64", "macos-arm64", "windows-x86_64"]  # see build_matrix.txt

raw = sys.stdin.read()
inputs = (json.loads(raw) if raw.strip() else {}).get("inputs", {})
project = str(inputs.get("project") or "baton")
count = max(0, min(int(inputs.get("targets") or 3), len(MATRIX)))
results = [{"target": t, "ok": i != 2} for i, t in enumerate(MATRIX[:count])]

out_dir = os.environ.get("BATON_ARTIFACTS_DIR", "artifacts")
os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as fh:
    json.dump({"project": project, "results": results}, fh, indent=2, sort_keys=True)

passed = sum(1 for r in results if r["ok"])
print(json.dumps({"project": project, "targets": count, "passed": passed}, sort_keys=True))
