"""The runtime code keeps the shape docs/development.md promises: no function over 80 lines
(a function that long does more than one thing; split it where its steps are)."""

from __future__ import annotations

import ast

from support.paths import ROOT

RUNTIME = ("casscade", "publisher", "materializer", "shared")
MAX_FUNCTION_LINES = 80


def test_no_runtime_function_is_over_80_lines() -> None:
    long = []
    files = [p for top in RUNTIME for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(files) > 100  # the runtime is there to look at
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                f"({lines} lines)")
    assert long == []
