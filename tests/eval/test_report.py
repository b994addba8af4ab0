"""`baer-fast eval --report DIR` on an LLMBar condition: every image is embedded in the HTML as a
valid PNG (a data: URI), equal to the PNG copy written beside it; a rerun leaves no stale plot."""
from __future__ import annotations

import base64
import io
import json
import os
import re

from baer_fast.cli import main
from baer_fast.eval.report import position_consistency, reliability_bins
from baer_fast.io.records import Signals

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _images(html: str) -> dict:
    """{data-file: embedded PNG bytes}; every <img> must embed its PNG."""
    tags = re.findall(r"<img[^>]*>", html)
    out = {}
    for tag in tags:
        src = re.search(r'\ssrc="([^"]+)"', tag).group(1)
        assert src.startswith("data:image/png;base64,"), src[:40]
        out[re.search(r'\sdata-file="([^"]+)"', tag).group(1)] = base64.b64decode(src.split(",", 1)[1])
    return out


def _text(html: str) -> str:
    """The page without its embedded images."""
    return re.sub(r'src="data:[^"]*"', 'src=""', html)


def test_eval_report_writes_html_and_valid_pngs(llmbar, tmp_path, capsys):
    rep = tmp_path / "report"
    rc = main(["--quiet", "eval", "--signals", llmbar["signals"], "--scores", llmbar["scores"],
               "--head", llmbar["head"], "--report", str(rep), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    assert json.loads(out)["report_html"] == str(rep / "report.html")
    html = (rep / "report.html").read_text(encoding="utf-8")
    page = _text(html)
    assert "<style>" in page and "<link" not in page and "http" not in page      # self-contained
    assert " src=\"\"" in page and not re.search(r'src="(?!data:)[^"]', html)   # no image from a file
    images = _images(html)
    assert {"accuracy_by_subset.png", "reliability.png", "position_consistency.png", "stack_lambda.png"} <= set(images)
    for name, data in images.items():
        assert not os.path.isabs(name) and "/" not in name
        assert data.startswith(PNG_SIGNATURE), name
        assert (rep / name).read_bytes() == data, name          # the PNG copy beside the page
        try:
            from PIL import Image
        except ImportError:
            continue
        with Image.open(io.BytesIO(data)) as im:
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
    for data in _images(html).values():
        assert data.startswith(PNG_SIGNATURE)


def test_rerun_without_head_leaves_no_stale_plot(llmbar, tmp_path, capsys):
    rep = tmp_path / "r"
    base = ["--quiet", "eval", "--signals", llmbar["signals"], "--scores", llmbar["scores"], "--report", str(rep)]
    assert main(base + ["--head", llmbar["head"]]) == 0
    assert (rep / "stack_lambda.png").exists()
    assert main(base) == 0
    html = (rep / "report.html").read_text(encoding="utf-8")
    assert "stack_lambda" not in html
    assert sorted(f for f in os.listdir(rep) if f.endswith(".png")) == sorted(_images(html))


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


def test_report_states_the_order_averaged_reading_and_the_dev_baseline_as_the_table_does():
    # the text table prints, beside the headline, BAER averaged over both orders where pairs scored exactly 0
    # and the baseline chosen on the dev rows; the HTML page shows the same figures
    from baer_fast.eval.metrics import evaluate, format_table
    from baer_fast.eval.report import _fair_baseline_html
    from baer_fast.heads.single import ConstantHead

    recs, roles = [], []
    for i in range(16):
        lab = "a" if i % 2 else "b"
        right, wrong = (0.9, 0.1) if lab == "a" else (0.1, 0.9)
        recs.append(Signals(f"p{i}", {"k": [right, wrong] if i in (0, 1, 3, 5) else [right, right],
                                      "j": [right, right] if i % 3 else [wrong, wrong]}, label=lab))
        roles.append("test" if i < 10 else "calibration")
    rep = evaluate(recs, ConstantHead("k").score(recs), roles)
    assert rep["n_score_ties"] == 4 and "strongest_on_dev" in rep
    diff = f"{100 * (rep['accuracy_native'] - rep['strongest_baseline']['accuracy']):+.2f} points"
    page = _fair_baseline_html(rep)
    assert diff in format_table(rep) and diff in page
    assert f"{100 * rep['accuracy_native']:.2f}%" in page
    dev = rep["strongest_on_dev"]
    assert f"dev rows: {dev['expert']} ({dev['reading']} reading), {100 * dev['accuracy']:.2f}% here" in page
