"""`make bench` (= `python -m bench`): run every section and regenerate bench/RESULTS.md.

    python -m bench                 # the full run (about 10 minutes here)
    python -m bench --quick         # smaller sizes, one round: a smoke run of every section
    python -m bench --only steps,scorecard --out /tmp/partial.md

The analysis in bench/FINDINGS.md (written by hand after looking at the figures) is copied
to the end of the report. The raw data goes to bench/results.json next to the report;
`--render-only` rebuilds the report from it (after editing FINDINGS.md) without measuring.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import machine, report
from bench.suite import SECTIONS, Plan

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--render-only", action="store_true", help="rebuild the report from results.json")
    opts = parser.parse_args(argv)
    raw_path = opts.out.with_name(opts.out.stem.lower() + ".json")
    findings_path = HERE / "FINDINGS.md"
    findings = findings_path.read_text() if findings_path.exists() else ""
    if opts.render_only:
        saved = json.loads(raw_path.read_text())
        opts.out.write_text(report.document(saved["results"], saved["machine"], saved["command"], findings))
        return 0
    plan = Plan.quick() if opts.quick else Plan()
    wanted = opts.only.split(",") if opts.only else list(SECTIONS)
    unknown = [w for w in wanted if w not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    started = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - started:6.0f} s] {text}", file=sys.stderr, flush=True)

    info = machine.describe()
    results = {}
    for name in wanted:
        results[name] = SECTIONS[name](plan, log)
    info["load_at_end"] = machine.load()
    info["bench_minutes"] = f"{(time.monotonic() - started) / 60:.1f}"
    command = (
        "make bench" + (" ARGS=--quick" if opts.quick else "") + (f" --only {opts.only}" if opts.only else "")
    )
    # the raw data first: a report that fails to render loses no measurement (`--render-only`)
    raw_path.write_text(json.dumps({"machine": info, "command": command, "results": results}, indent=1))
    opts.out.write_text(report.document(results, info, command, findings))
    log(f"wrote {opts.out}")
    print(report.document(results, info, command, "").split("## Durable")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
