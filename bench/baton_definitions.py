"""Loading definitions: read, parse, validate and prepare an N-node workflow file.

    python -m bench.baton_definitions --n 1000 --dir D [--samples 7]

The file is the resume table's (`steps_yaml`: a chain of N tool steps). Three costs, each
through the real `Catalog` and `prepare` the engine uses:
  cold       a file the process has never seen, in a new catalog (median of `samples` files,
             each with other content, so no cache of any kind helps);
  edited     the same file after its last step's `with:` changed (what a command pays after
             an edit: re-read, re-parse, re-validate, re-prepare);
  unchanged  a reload when nothing changed (what every command pays: a `stat` per file, and
             no parse: `Catalog.parses` must not move).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.protocol import emit
from bench.rig import bench_tools, steps_yaml
from core.engine.prepared import prepare
from core.workflows.catalog import Catalog

SETTLED_S = 10  # files are dated this far back: outside the catalog's racy-write window


def _write(path: Path, text: str, *, settled: bool = True) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    if settled:
        old = time.time() - SETTLED_S
        os.utime(path, (old, old))


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(root: Path, n: int, samples: int) -> dict[str, object]:
    tools = bench_tools()
    cold: list[float] = []
    for i in range(samples):
        folder = root / f"cold{i}"
        folder.mkdir(parents=True)
        _write(folder / "defs.yaml", steps_yaml(f"defs{i}", n, "chain"))

        def load(folder: Path = folder, name: str = f"defs{i}") -> None:
            prepare(Catalog([folder]).get(name), tools)

        cold.append(_ms(load))

    folder = root / "edited"
    folder.mkdir()
    path = folder / "defs.yaml"
    base = steps_yaml("defs", n, "chain").rstrip("\n")
    _write(path, base + "\n")
    catalog = Catalog([folder])
    prepare(catalog.get("defs"), tools)
    edited: list[float] = []
    parses_before = catalog.parses
    for i in range(samples):
        _write(path, base + f"\n    with: {{v: {i}}}\n")

        def reload() -> None:
            catalog.reload()
            prepare(catalog.get("defs"), tools)

        edited.append(_ms(reload))
    edit_parses = catalog.parses - parses_before

    unchanged: list[float] = []
    parses_before = catalog.parses
    for _ in range(max(samples, 20)):

        def again() -> None:
            catalog.reload()
            prepare(catalog.get("defs"), tools)

        unchanged.append(_ms(again))
    return {
        "n": n,
        "bytes": path.stat().st_size,
        "samples": samples,
        "cold_ms": statistics.median(cold),
        "cold_min_ms": min(cold),
        "edited_ms": statistics.median(edited),
        "edited_min_ms": min(edited),
        "edited_parses": edit_parses,
        "unchanged_ms": statistics.median(unchanged),
        "unchanged_parses": catalog.parses - parses_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(measure(Path(opts.dir), opts.n, opts.samples))


if __name__ == "__main__":
    main()
