"""The import graph (DESIGN.md, "Module map"): no cycles, no import against the layer order, no
module over MAX_LINES lines. Every import counts, lazy ones inside functions included
(tests/invariants/import_graph.py); the checker is shown to fail on a planted cycle and violation."""
import os

import pytest

from tests.invariants import import_graph as graph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 450
OVER_LIMIT_ALLOWED: set = set()
MAX_DOC_LINES = 15
LONG_DOC_ALLOWED: set = set()


def test_no_import_cycles():
    assert graph.cycles(graph.edges(ROOT)) == []


def test_no_import_against_the_layer_order():
    assert graph.violations(graph.edges(ROOT)) == []


def test_every_module_sits_in_a_room():
    rooms = set(graph.LAYERS) | set(graph.WIRING)
    loose = [m for m in graph.module_files(ROOT) if m not in graph.GROUND and graph.room(m) not in rooms]
    loose += [m for m in graph.module_files(ROOT) if graph.room(m) == "runtime" and m != "baer_fast.runtime"
              and m.split(".")[2] not in graph.RUNTIME]
    assert loose == []


def test_no_module_over_the_size_limit():
    over = {os.path.relpath(p, ROOT): n for p in graph.module_files(ROOT).values()
            if (n := sum(1 for _ in open(p, encoding="utf-8"))) > MAX_LINES}
    assert set(over) <= OVER_LIMIT_ALLOWED, over


def test_module_docstrings_state_the_boundary_briefly():
    import ast
    long = {}
    for path in graph.module_files(ROOT).values():
        doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()), clean=False)
        if doc and doc.count("\n") + 1 > MAX_DOC_LINES:
            long[os.path.relpath(path, ROOT)] = doc.count("\n") + 1
    assert set(long) <= LONG_DOC_ALLOWED, long


def _checkout(tmp_path, files: dict[str, str]) -> str:
    """A throwaway checkout: baer_fast/ with the given modules (and empty __init__ files), kernels/."""
    for rel, text in {"baer_fast/__init__.py": "", "kernels/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            init = tmp_path / parent / "__init__.py"
            if parent.parts and not init.exists():
                init.write_text("")
        path.write_text(text)
    return str(tmp_path)


def test_a_lazy_cycle_is_reported(tmp_path):
    root = _checkout(tmp_path, {
        "baer_fast/io/a.py": "from baer_fast.io.b import x\n",
        "baer_fast/io/b.py": "def x():\n    from baer_fast.io import a\n    return a\n",
    })
    assert graph.cycles(graph.edges(root)) == [["baer_fast.io.a", "baer_fast.io.b"]]


def test_a_relative_cycle_through_type_checking_is_reported(tmp_path):
    root = _checkout(tmp_path, {
        "baer_fast/runtime/plan/p.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..model import m\n",
        "baer_fast/runtime/model/m.py": "from ..plan.p import q\n",
    })
    assert graph.cycles(graph.edges(root)) == [["baer_fast.runtime.model.m", "baer_fast.runtime.plan.p"]]


@pytest.mark.parametrize("src, text, bad", [
    ("baer_fast/io/r.py", "def f():\n    import baer_fast.runtime.prefill\n", "baer_fast.io.r -> baer_fast.runtime.prefill"),
    ("kernels/k.py", "from baer_fast.features.evidence import EPS\n", "baer_fast.kernels.k -> baer_fast.features.evidence"),
    ("baer_fast/runtime/r.py", "from baer_fast.bank.runner import run_experts\n", "baer_fast.runtime.r -> baer_fast.bank.runner"),
    ("baer_fast/runtime/plan/t.py", "from baer_fast.runtime.prefill import PrefixEngine\n",
     "baer_fast.runtime.plan.t -> baer_fast.runtime.prefill"),
    ("baer_fast/runtime/prefill.py", "from baer_fast.runtime.open import open_engine\n",
     "baer_fast.runtime.prefill -> baer_fast.runtime.open"),
    ("baer_fast/heads/h.py", "from baer_fast.selection import fit\n", "baer_fast.heads.h -> baer_fast.selection.fit"),
])
def test_an_import_against_the_order_is_reported(tmp_path, src, text, bad):
    files = {src: text, "baer_fast/runtime/prefill.py": "", "baer_fast/runtime/open.py": "",
             "baer_fast/bank/runner.py": "", "baer_fast/features/evidence.py": "",
             "baer_fast/selection/fit.py": ""}
    files[src] = text
    found = graph.violations(graph.edges(_checkout(tmp_path, files)))
    assert [v.split(": ", 1)[1] for v in found] == [bad]


def test_errors_and_the_wiring_are_allowed(tmp_path):
    root = _checkout(tmp_path, {
        "kernels/k.py": "from baer_fast.errors import BaerError\n",
        "baer_fast/errors.py": "",
        "baer_fast/commands/c.py": "from baer_fast.bank import runner\nfrom baer_fast.runtime import open\n",
        "baer_fast/bank/runner.py": "from baer_fast.runtime.open import open_engine\n",
        "baer_fast/runtime/open.py": "",
    })
    edges = graph.edges(root)
    assert len(edges) == 4 and graph.violations(edges) == [] and graph.cycles(edges) == []
