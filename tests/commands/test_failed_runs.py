"""A run that fails before its first result leaves no output behind that would block the fixed command."""
import os

from baer_fast.cli import main
from baer_fast.io.records import write_pairs
from tests.fixtures.tiny_models import build_model_dir, make_pairs


def test_a_model_that_does_not_load_leaves_no_output(tmp_path, qwen_dir, capsys):
    """experts and score --model opened their resumable output before the model: a refused model left an
    empty output and progress record, and the corrected command was refused as "a different run"."""
    from baer_fast import artifact
    bad = build_model_dir(str(tmp_path / "mpt"), arch="mpt", seed=11)        # refused by the tree probe
    pairs = tmp_path / "p.jsonl"
    write_pairs(str(pairs), make_pairs(4))
    head = tmp_path / "h.json"
    artifact.save(str(head), artifact.default_artifact())
    for argv, out in ((["experts", "--experts", "direct,score"], tmp_path / "s.jsonl"),
                      (["score", "--head", str(head)], tmp_path / "scores.jsonl")):
        assert main(["-q", *argv, "--model", bad, "--input", str(pairs), "--out", str(out)]) == 2
        assert "does not honour" in capsys.readouterr().err
        assert sorted(os.listdir(tmp_path)) == ["h.json", "mpt", "p.jsonl"]
        assert main(["-q", *argv, "--model", qwen_dir, "--input", str(pairs), "--out", str(out)]) == 0
        capsys.readouterr()
        for f in os.listdir(tmp_path):
            if f not in ("h.json", "mpt", "p.jsonl"):
                os.unlink(tmp_path / f)


def test_an_experts_list_naming_none_is_refused(tmp_path, capsys):
    """`--experts ,` ran no expert and wrote signals with empty runs, exit 0."""
    pairs = tmp_path / "p.jsonl"
    write_pairs(str(pairs), make_pairs(2))
    for arg in (",", " , "):
        assert main(["-q", "experts", "--model", str(tmp_path), "--input", str(pairs), "--out",
                     str(tmp_path / "s.jsonl"), "--experts", arg]) == 2
        err = capsys.readouterr().err
        assert "field '--experts':" in err and "names no expert" in err
    assert not (tmp_path / "s.jsonl").exists()


def test_a_checkpoint_swapped_for_one_of_the_same_size_does_not_resume(tmp_path, capsys):
    """The resume fingerprint held each weights file's name and size only: another checkpoint of the same
    shapes copied in resumed silently and mixed two models' runs in one output."""
    import shutil
    model = build_model_dir(str(tmp_path / "m"), arch="qwen3", seed=0)
    other = build_model_dir(str(tmp_path / "other"), arch="qwen3", seed=1)
    pairs, out = tmp_path / "p.jsonl", tmp_path / "s.jsonl"
    write_pairs(str(pairs), make_pairs(3))
    argv = ["-q", "experts", "--experts", "direct", "--model", model, "--input", str(pairs), "--out", str(out)]
    assert main(argv) == 0
    assert main(argv) == 0 and "(0 run, 3 already done)" in capsys.readouterr().err
    shutil.copyfile(os.path.join(other, "model.safetensors"), os.path.join(model, "model.safetensors"))
    assert main(argv) == 2
    assert "differs in: weights" in capsys.readouterr().err


def test_a_resume_with_other_generation_budgets_is_refused(tmp_path, qwen_dir, capsys):
    """The generative experts' budgets and seed are part of what a resumed run must share."""
    pairs, out = tmp_path / "p.jsonl", tmp_path / "s.jsonl"
    write_pairs(str(pairs), make_pairs(2))
    argv = ["-q", "experts", "--experts", "direct,cot", "--model", qwen_dir, "--input", str(pairs), "--out", str(out)]
    assert main([*argv, "--max-new-tokens", "cot=3"]) == 0
    assert main([*argv, "--max-new-tokens", "cot=3"]) == 0 and "(0 run, 2 already done)" in capsys.readouterr().err
    assert main([*argv, "--max-new-tokens", "cot=4"]) == 2
    assert "differs in: generation" in capsys.readouterr().err
