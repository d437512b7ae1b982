"""The DAG picture's layout: columns by depth, rows by the dependencies' rows, compact when large."""

from __future__ import annotations

from adapters.web.dag import BOX_W, FULL_LIMIT, WRAP, layout


def test_nodes_go_in_the_column_of_their_longest_path_with_one_edge_per_dependency() -> None:
    deps = {"top": (), "left": ("top",), "right": ("top",), "bottom": ("left", "right"),
            "late": ("top", "bottom")}
    drawing = layout(list(deps), deps)
    x = {b.node_id: b.x for b in drawing.boxes}
    assert x["top"] < x["left"] == x["right"] < x["bottom"] < x["late"]
    assert len(drawing.edges) == 6 and not drawing.compact
    assert drawing.width >= x["late"] + BOX_W


def test_a_column_is_ordered_by_where_its_dependencies_are() -> None:
    deps = {"a": (), "b": (), "from_b": ("b",), "from_a": ("a",)}
    y = {b.node_id: b.y for b in layout(list(deps), deps).boxes}
    assert y["a"] < y["b"] and y["from_a"] < y["from_b"]  # crossing edges untangled


def test_a_large_or_very_wide_run_gets_the_compact_map_without_edges() -> None:
    many = {f"n{i}": ((f"n{i - 1}",) if i else ()) for i in range(FULL_LIMIT + 1)}
    assert layout(list(many), many).compact
    fan = {"root": (), **{f"leaf{i}": ("root",) for i in range(WRAP + 1)}}
    drawing = layout(list(fan), fan)
    assert drawing.compact and drawing.edges == () and len(drawing.boxes) == WRAP + 2
    assert len({b.x for b in drawing.boxes}) == 3  # the root's column, then the leaves wrapped in two


def test_long_ids_are_cut_in_the_label_only() -> None:
    drawing = layout(["a_very_long_node_identifier_indeed"], {})
    assert drawing.boxes[0].node_id == "a_very_long_node_identifier_indeed"
    assert drawing.boxes[0].label.endswith("…") and len(drawing.boxes[0].label) <= 21
