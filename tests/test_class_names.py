"""One class per name in the package: a reader who finds `TaskEnd` or `RunSummary` finds one definition."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import cltoolkit

PACKAGE = Path(cltoolkit.__file__).parent


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert not shared, shared


def test_nav4_hook_types_keep_the_names_methods_write() -> None:
    from cltoolkit.plugin import nav4, wmf

    assert nav4.TaskStart is nav4.Nav4TaskStart
    assert nav4.TaskEnd is nav4.Nav4TaskEnd
    assert nav4.Minibatch is nav4.Nav4Minibatch
    assert nav4.TaskEnd.__name__ != wmf.TaskEnd.__name__  # two suites, two classes, two names
