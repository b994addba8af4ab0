"""`baer-fast eval --report DIR` on an LLMBar condition: every image the HTML references is a valid PNG."""
from __future__ import annotations

import json
import os
import re

from baer_fast.cli import main
from baer_fast.eval.report import position_consistency, reliability_bins
from baer_fast.io.records import Signals

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _images(html: str) -> list[str]:
    return re.findall(r'<img[^>]*\ssrc="([^"]+)"', html)


def test_eval_report_writes_html_and_valid_pngs(llmbar, tmp_path, capsys):
    rep = tmp_path / "report"
    rc = main(["--quiet", "eval", "--signals", llmbar["signals"], "--scores", llmbar["scores"],
               "--head", llmbar["head"], "--report", str(rep), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    assert json.loads(out)["report_html"] == str(rep / "report.html")
    html = (rep / "report.html").read_text(encoding="utf-8")
    assert "<style>" in html and "<link" not in html and "http" not in html      # self-contained
    images = _images(html)
    assert {"accuracy_by_subset.png", "reliability.png", "position_consistency.png"} <= set(images)
    for src in images:
        assert not os.path.isabs(src) and "/" not in src
        data = (rep / src).read_bytes()
        assert data.startswith(PNG_SIGNATURE), src
        try:
            from PIL import Image
        except ImportError:
            continue
        with Image.open(rep / src) as im:
            im.verify()
            assert im.format == "PNG"
    for text in ("McNemar", "Head selection", "stack", "Position consistency", "coverage",
                 "Accuracy per subset: BAER and each expert", "bootstrap intervals", "Brier", "first-shown rate",
                 "Length bias"):
        assert text in html
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert cells and not [c for c in cells if c.lstrip().startswith(("{", "[", "&quot;"))]   # no raw JSON
    assert not [f for f in os.listdir(rep) if f.endswith(".tmp")]


def test_report_without_artifact_says_how_to_get_the_selection(llmbar, tmp_path, capsys):
    rc = main(["--quiet", "eval", "--signals", llmbar["signals"], "--scores", llmbar["scores"],
               "--report", str(tmp_path / "r"), "--split", "all"])
    assert rc == 0
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "--head head.json" in html
    for src in _images(html):
        assert (tmp_path / "r" / src).read_bytes().startswith(PNG_SIGNATURE)


def test_position_consistency_counts_disagreements():
    recs = [Signals("1", {"e": [0.9, 0.8], "one": [0.7]}), Signals("2", {"e": [0.9, 0.2]}),
            Signals("3", {"e": [0.5, 0.7]}), Signals("4", {"e": [0.5, 0.5, None, 0.3]})]
    c = position_consistency(recs, ["e", "one"], [True] * 4)
    # run pairs: (0.9,0.8) agree, (0.9,0.2) opposite, (0.5,0.7) one at 0.5, (0.5,0.5) agree, (None,0.3) skipped
    # first-shown: decided runs 0.9 (ab, first), 0.8 (ba, not), 0.9, 0.2 (ba, first), 0.7 (ba, not): 3 of 5
    assert c["e"] == {"n_run_pairs": 4, "disagree": 2, "consistency": 0.5, "first_shown_rate": 0.6}
    assert c["one"]["consistency"] is None


def test_reliability_bins_are_calibration_of_p_a():
    import numpy as np

    p = np.array([0.05, 0.05, 0.95, 0.95])
    rel = reliability_bins(p, np.array([False, False, True, True]))
    assert [b["n"] for b in rel["bins"]] == [2, 2]
    from tests.fixtures.tolerances import fp64_tol
    assert abs(rel["ece"] - 0.05) <= fp64_tol(16)                    # a few float64 operations on values <= 1
