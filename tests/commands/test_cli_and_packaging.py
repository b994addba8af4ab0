import subprocess
import sys
import zipfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_on_the_embedded_sample(cli):
    code, out, err = cli("--quiet", "demo")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Test-split accuracy")
    rows = [l for l in lines if l.split()[:1] and l.split()[0] in
            {"ChatGPT", "ChatGPT-0301", "Falcon", "GPT-4", "LLaMA2", "PaLM2"}]
    assert len(rows) == 6
    assert lines[1].split()[2:4] == ["BAER", "2-ord"]
    assert all(0 <= float(r.split()[3]) <= 100 for r in rows)


def test_demo_out_keeps_every_step_and_the_temporary_folder_goes(cli, tmp_path, monkeypatch):
    """--out holds what the pipeline made (pairs, signals, heads, scores), so eval reruns from it; without
    --out nothing is left behind."""
    code, _, err = cli("--quiet", "demo", "--out", str(tmp_path / "d"))
    assert code == 0, err
    d = tmp_path / "d"
    assert (d / "pairs.jsonl").exists()
    for name in ("signals", "head", "scores"):
        assert len(list(d.glob(f"{name}.*"))) == 6, name
    code, out, err = cli("eval", "--signals", str(d / "signals.GPT-4.jsonl"), "--scores", str(d / "scores.GPT-4.jsonl"),
                         "--head", str(d / "head.GPT-4.json"))
    assert code == 0, err
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)          # re-read TMPDIR
    code, _, err = cli("--quiet", "demo")
    assert code == 0, err
    assert list((tmp_path / "t").iterdir()) == []


def test_console_script_help_lists_commands():
    exe = Path(sys.executable).with_name("baer-fast")
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for cmd in ("check", "experts", "import", "fit", "score", "eval", "demo"):
        assert cmd in res.stdout


def test_cli_does_not_import_torch_for_signal_commands():
    code = ("import sys; from baer_fast.cli import main; main(['--quiet', 'demo']); "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_kernels_subpackage_imports_from_the_install():
    import baer_fast.kernels
    assert Path(baer_fast.kernels.__file__).parent.name == "kernels"


def test_built_wheel_ships_kernels_and_demo_data(tmp_path):
    res = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                          str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    wheel, = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "baer_fast/kernels/__init__.py" in names
    assert "baer_fast/kernels/choice_logits.py" in names
    assert "baer_fast/data/llmbar_natural/Natural/dataset.json" in names
    assert "baer_fast/data/llmbar_natural/LICENSE" in names


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    marker = "python -m pytest"
    readme_cmd = next(l for l in readme.splitlines() if marker in l and "pip install" in l)
    test_part = readme_cmd[readme_cmd.index(marker):].strip().rstrip("`")
    assert test_part in ci


def test_score_takes_model_with_input_only(cli, llmbar, tmp_path):
    """`score --signals S --model M` would score S and ignore M (the judging is done): refused, as is
    `--input` without `--model`; neither leaves an output."""
    out = tmp_path / "s.jsonl"
    pairs = tmp_path / "p.jsonl"
    pairs.write_text('{"id": "x", "question": "q", "response_a": "a", "response_b": "b"}\n', encoding="utf-8")
    for src in (["--signals", llmbar["signals"], "--model", str(tmp_path)], ["--input", str(pairs)]):
        code, _, err = cli("score", *src, "--head", llmbar["head"], "--out", str(out))
        assert code == 2 and err.startswith("error: field '--model': "), err
        assert not out.exists()
