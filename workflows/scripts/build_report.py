"""Simulated build for the `build-report` workflow.

The step's context arrives as JSON on stdin (`{"inputs": …, "nodes": …, "run": {"id": …}}`);
the targets come from scripts/build_matrix.txt next to the workflow (declared in `files:`, so
editing it re-runs the step; Baton exports the workflow's directory as $BATON_WORKFLOW_DIR,
while the step runs in the run's own directory). The report goes to
$BATON_ARTIFACTS_DIR/report.json and a JSON summary to stdout (checked against the node's
`output.schema`). Deterministic: the same inputs and matrix give the same bytes, so the
step's result is safely cached.
"""

import json
import os
import sys
from pathlib import Path

matrix_file = Path(os.environ.get("BATON_WORKFLOW_DIR", ".")) / "scripts" / "build_matrix.txt"
MATRIX = [line.strip() for line in matrix_file.read_text(encoding="utf-8").splitlines() if line.strip()]

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
