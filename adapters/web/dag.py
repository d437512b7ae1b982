"""A run's DAG as a picture: layered layout, drawn by the page template as SVG (pure).

Each node goes in the column of its longest path from a source; within a column, nodes are
ordered by the mean row of their dependencies (one barycentre sweep, which untangles the
usual fan-out / fan-in shapes). Up to `FULL_LIMIT` nodes get labelled boxes and curved edges;
larger runs get a compact map: one small square per node, coloured by state, each column
wrapped every `WRAP` squares, no edges (the node list below the picture shows dependencies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.splitting import fit

FULL_LIMIT = 300  # nodes drawn as labelled boxes with edges; more: the compact map
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 168, 30, 56, 10, 12
CELL, CELL_GAP, WRAP = 12, 3, 50
LABEL = 21  # characters of a node id shown in its box (the full id is its tooltip)


@dataclass(frozen=True, slots=True)
class Box:
    node_id: str
    x: int
    y: int
    label: str


@dataclass(frozen=True, slots=True)
class Drawing:
    width: int
    height: int
    compact: bool
    boxes: tuple[Box, ...]
    edges: tuple[str, ...]  # SVG path data, one per dependency
    box_w: int
    box_h: int


def _layers(order: Sequence[str], deps: Mapping[str, Sequence[str]]) -> dict[str, int]:
    layer: dict[str, int] = {}
    for node in order:  # topological: every dependency has its layer already
        layer[node] = 1 + max((layer[d] for d in deps.get(node, ()) if d in layer), default=-1)
    return layer


def _columns(order: Sequence[str], deps: Mapping[str, Sequence[str]]) -> list[list[str]]:
    layer = _layers(order, deps)
    columns: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    row: dict[str, float] = {}
    for node in order:
        columns[layer[node]].append(node)
    for column in columns:
        for i, node in enumerate(column):  # the initial order (topological) breaks ties
            placed = [row[d] for d in deps.get(node, ()) if d in row]
            row[node] = sum(placed) / len(placed) if placed else float(i)
        column.sort(key=lambda n: row[n])
        for i, node in enumerate(column):
            row[node] = float(i)
    return columns


def layout(order: Sequence[str], deps: Mapping[str, Sequence[str]]) -> Drawing:
    """`order` topological (every node after its dependencies); `deps` by node id."""
    columns = _columns(order, deps)
    tallest = max((len(c) for c in columns), default=0)
    if len(order) > FULL_LIMIT or tallest > WRAP:
        return _compact(columns)
    at: dict[str, tuple[int, int]] = {}
    boxes: list[Box] = []
    for c, column in enumerate(columns):
        for r, node in enumerate(column):
            x, y = PAD + c * (BOX_W + GAP_X), PAD + r * (BOX_H + GAP_Y)
            at[node] = (x, y)
            boxes.append(Box(node, x, y, fit(node, LABEL)))
    edges = []
    for node in order:
        x2, y2 = at[node]
        for dep in deps.get(node, ()):
            if dep not in at:
                continue
            x1, y1 = at[dep][0] + BOX_W, at[dep][1] + BOX_H // 2
            mid = (x1 + x2) // 2
            edges.append(f"M{x1} {y1}C{mid} {y1} {mid} {y2 + BOX_H // 2} {x2} {y2 + BOX_H // 2}")
    width = PAD * 2 + max(len(columns), 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max(tallest, 1) * (BOX_H + GAP_Y) - GAP_Y
    return Drawing(width, height, False, tuple(boxes), tuple(edges), BOX_W, BOX_H)


def _compact(columns: list[list[str]]) -> Drawing:
    step = CELL + CELL_GAP
    boxes: list[Box] = []
    x = PAD
    height = 0
    for column in columns:
        for start in range(0, len(column), WRAP):
            for r, node in enumerate(column[start : start + WRAP]):
                boxes.append(Box(node, x, PAD + r * step, ""))
                height = max(height, PAD + (r + 1) * step)
            x += step
        x += step  # a gap between layers
    return Drawing(max(x + PAD, 2 * PAD), height + PAD, True, tuple(boxes), (), CELL, CELL)
