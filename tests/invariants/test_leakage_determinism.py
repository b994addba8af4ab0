"""No label leakage and determinism: the artifact is a pure function of non-test rows."""
import dataclasses

from baer_fast import artifact
from baer_fast.io.records import write_signals
from baer_fast.io.splits import roles

from tests.fixtures.data import make_signals


def _fit_bytes(cli, tmp_path, rows, name):
    sig = tmp_path / f"{name}.jsonl"
    out = tmp_path / f"{name}.head.json"
    write_signals(str(sig), rows)
    code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", out)
    assert code == 0, err
    return out.read_bytes()


def test_blanking_test_labels_leaves_the_artifact_byte_identical(cli, tmp_path):
    rows = make_signals(300, seed=7)
    r = roles(rows)
    assert "test" in r
    blank = [dataclasses.replace(x, label=None) if ro == "test" else x for x, ro in zip(rows, r)]
    flipped = [dataclasses.replace(x, label={"a": "b", "b": "a"}[x.label]) if ro == "test" else x
               for x, ro in zip(rows, r)]
    original = _fit_bytes(cli, tmp_path, rows, "orig")
    assert _fit_bytes(cli, tmp_path, blank, "blank") == original
    assert _fit_bytes(cli, tmp_path, flipped, "flipped") == original


def test_two_fits_give_identical_artifacts(cli, tmp_path):
    rows = make_signals(200, seed=8)
    assert _fit_bytes(cli, tmp_path, rows, "one") == _fit_bytes(cli, tmp_path, rows, "two")


def test_artifact_records_what_fitted_it(cli, tmp_path):
    rows = make_signals(200, seed=9)
    _fit_bytes(cli, tmp_path, rows, "rec")
    art = artifact.load(str(tmp_path / "rec.head.json"))
    r = roles(rows)
    assert art["fitted_on"]["n_rows"] == sum(x != "test" for x in r)
    assert art["fitted_on"]["n_selection"] == r.count("selection")
    assert len(art["fitted_on"]["ids_sha256"]) == 64


def test_score_never_reads_labels(cli, tmp_path):
    rows = make_signals(150, seed=10)
    _fit_bytes(cli, tmp_path, rows, "h")
    head = tmp_path / "h.head.json"
    outs = []
    for name, recs in (("lab", rows), ("nolab", [dataclasses.replace(x, label=None) for x in rows])):
        sig = tmp_path / f"score-{name}.jsonl"
        write_signals(str(sig), recs)
        code, _, err = cli("score", "--signals", sig, "--head", head, "--out", tmp_path / f"{name}.scores.jsonl")
        assert code == 0, err
        outs.append((tmp_path / f"{name}.scores.jsonl").read_text())
    assert outs[0] == outs[1]
    assert outs[0].count("\n") == len(rows)        # full coverage: every pair scored


def test_fit_jobs_build_the_same_trees(cli, tmp_path, monkeypatch):
    """fit --jobs N: the route candidate's forests are built on N threads, and the artifact is the
    same bytes as on one."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier
    seen, real = [], RandomForestClassifier.fit

    def spy(self, *a, **kw):
        backend, jobs = joblib.parallel.get_active_backend()
        # the workers the forest's Parallel(n_jobs=self.n_jobs, prefer="threads") takes, on threads
        seen.append((type(backend).__name__, joblib.effective_n_jobs(self.n_jobs)))
        return real(self, *a, **kw)
    monkeypatch.setattr(RandomForestClassifier, "fit", spy)
    rows = make_signals(200, seed=10)
    sig, one, two = tmp_path / "s.jsonl", tmp_path / "one.json", tmp_path / "two.json"
    write_signals(str(sig), rows)
    for out, jobs in ((one, "1"), (two, "2")):
        code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", out, "--head", "route", "--jobs", jobs)
        assert code == 0, err
    assert {jobs for _, jobs in seen} == {1, 2}
    assert {backend for backend, jobs in seen if jobs == 2} == {"ThreadingBackend"}
    assert one.read_bytes() == two.read_bytes()
    code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", tmp_path / "x.json", "--jobs", "0")
    assert code != 0 and "--jobs" in err
