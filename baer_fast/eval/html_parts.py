"""Pieces of the `eval --report` page: matplotlib figures on the Agg canvas, PNGs written
atomically, escaped HTML tables, and images embedded as base64 data: URIs (the page needs no
other file; `data-file` names the PNG copy beside it). No report logic; `report.py` and
`report_sections.py` build their sections from these.
"""
from __future__ import annotations

import base64
import html
import io
import math

from baer_fast.io.jsonl import atomic_open


def figure(w: float, h: float):
    from matplotlib.figure import Figure     # Agg canvas via savefig; pyplot is never touched

    return Figure(figsize=(w, h), dpi=100)


def save_png(fig, path: str) -> bytes:
    """Write the figure to `path` as PNG (atomically) and return the bytes, for `img`."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    with atomic_open(path, "wb") as fh:
        fh.write(buf.getvalue())
    return buf.getvalue()


def pct(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"


def table(header: list, rows: list, bold_first: str | None = None) -> str:
    th = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for r in rows:
        cls = ' class="baer"' if bold_first is not None and r[0] == bold_first else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    return f"<table><tr>{th}</tr>{''.join(body)}</table>"


def img(name: str, alt: str, png: bytes) -> str:
    """The PNG inline (data: URI); `name` is the file it was also written to."""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return f'<p><img src="{src}" alt="{html.escape(alt)}" data-file="{html.escape(name)}"></p>'
