"""The package's import graph from source (ast, no imports run): every `import` and `from ... import`,
at module level, inside functions and under `if TYPE_CHECKING`, over baer_fast/ and kernels/.

Modules are dotted names (`baer_fast.runtime.prefill`; kernels/ is installed as `baer_fast.kernels`).
`from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`. The root
package `baer_fast` is imported by every submodule (Python does that), so edges *from* it, its
lazy `Judge` attribute, are left out; edges *to* it count as edges to ground.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass

# DESIGN.md, "Module map": "io and protocols import no other room; runtime imports kernels only
# (token ids in, verdicts out); bank imports io, protocols and runtime; features work on signals
# alone (io, kernels), heads on features, selection on heads and features; eval imports io,
# features and heads; kernels import nothing of the package; the wiring imports what it wires."
# `errors.py` and `progress.py` are ground every room may stand on. Each room below lists the
# rooms it may import besides itself and the ground; the wiring (WIRING: cli, commands, api,
# serve, integrations, and the artifact/scoring modules they share) may import any of them.
GROUND = ("baer_fast", "baer_fast.errors", "baer_fast.progress")
LAYERS = {
    "io": (),
    "protocols": (),
    "kernels": (),
    "runtime": ("kernels",),
    "bank": ("io", "protocols", "runtime"),
    "features": ("io", "kernels"),
    "heads": ("features",),
    "selection": ("heads", "features", "io"),     # io.splits: the data roles that decide what fit may read
    "eval": ("io", "features", "heads"),
}
WIRING = ("cli", "commands", "api", "serve", "integrations", "client", "artifact", "scoring")
# Inside the runtime, bottom up: a sub-room may import those before it (the engines one another
# not at all; open is the top: nothing in the runtime imports it).
RUNTIME = {
    "plan": (),
    "config": (),
    "queries": (),
    "seeds": (),                 # content-keyed sample seeds (pure): every backend that samples
    "reproducible": (),          # MKL's reproducible-GEMM mode (set at `import baer_fast`, checked at load)
    "model": ("plan", "config", "queries"),
    "prefill": ("plan", "model", "config", "queries", "interfaces"),
    "naive": ("plan", "model", "config", "queries", "interfaces"),
    "decode_io": (),
    "stops": (),
    "slots": ("plan", "model", "config"),
    "decode_kernel": ("model", "config", "decode_io"),
    "decode_step": ("plan", "model", "config", "sampling", "decode_io", "stops", "slots"),
    "decode_graphs": ("model", "config", "decode_io", "decode_kernel"),
    "decode": ("plan", "model", "config", "queries", "interfaces", "sampling", "decode_io", "stops", "slots",
               "decode_kernel", "decode_step", "decode_graphs"),
    "_nucleus_cpu": (),
    "sampling": ("plan", "model", "config", "queries", "interfaces", "_nucleus_cpu"),
    "probes": ("plan", "model", "config", "queries", "interfaces", "prefill", "naive", "decode", "sampling"),
    "vllm": ("plan", "model", "config", "queries", "interfaces", "decode", "decode_io", "stops", "sampling", "seeds"),
    "interfaces": ("config", "queries"),
    "open": ("plan", "model", "config", "queries", "prefill", "naive", "decode", "sampling",
             "probes", "vllm", "interfaces", "reproducible"),
}


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    path: str


def module_files(root: str) -> dict[str, str]:
    """{dotted module: file} for baer_fast/ and kernels/ under the checkout `root`."""
    out = {}
    for top, dotted in (("baer_fast", "baer_fast"), ("kernels", "baer_fast.kernels")):
        base = os.path.join(root, top)
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not (top == "baer_fast" and d == "kernels"))
            rel = os.path.relpath(folder, base)
            pkg = dotted if rel == "." else dotted + "." + rel.replace(os.sep, ".")
            for f in sorted(files):
                if f.endswith(".py"):
                    out[pkg if f == "__init__.py" else f"{pkg}.{f[:-3]}"] = os.path.join(folder, f)
    return out


def _resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def edges(root: str) -> list[Edge]:
    files = module_files(root)
    out = []
    for mod, path in files.items():
        if mod == "baer_fast":
            continue
        tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
        is_pkg = path.endswith("__init__.py")
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                if t == "baer_fast" or t.startswith("baer_fast."):
                    while t not in files and "." in t:       # `import baer_fast.x.y` of a name
                        t = t.rsplit(".", 1)[0]
                    if t != mod:
                        out.append(Edge(mod, t, node.lineno, path))
    return out


def cycles(graph_edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in graph_edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def room(mod: str) -> str:
    """baer_fast.runtime.model.load -> 'runtime'; baer_fast.kernels.dispatch -> 'kernels'."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _runtime_part(mod: str) -> str:
    parts = mod.split(".")
    return parts[2] if len(parts) > 2 else ""


def violations(graph_edges: list[Edge]) -> list[str]:
    """Imports against the layer order (LAYERS, RUNTIME), one line each: file:line src -> dst."""
    bad = []
    for e in graph_edges:
        if e.dst in GROUND:
            continue
        src, dst = room(e.src), room(e.dst)
        if src in WIRING:
            ok = True                                    # the wiring imports what it wires
        elif src not in LAYERS:
            ok = False                                   # a module outside every room: place it
        elif src == dst:
            ok = src != "runtime" or _runtime_ok(e.src, e.dst)
        else:
            ok = dst in LAYERS[src]
        if not ok:
            hint = ""
            if src == dst == "runtime" and _runtime_part(e.src) not in RUNTIME:
                hint = " (a new runtime module: give it its place in RUNTIME, import_graph.py)"
            elif src not in LAYERS and src not in WIRING:
                hint = " (a module outside every room: place it in LAYERS or WIRING, import_graph.py)"
            bad.append(f"{e.path}:{e.line}: {e.src} -> {e.dst}{hint}")
    return sorted(set(bad))


def _runtime_ok(src: str, dst: str) -> bool:
    a, b = _runtime_part(src), _runtime_part(dst)
    if a == b or b == "":                  # within one sub-room, or the runtime package itself
        return True
    return a in RUNTIME and b in RUNTIME[a]
