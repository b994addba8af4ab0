"""`baer-fast score [--head head.json] --out scores.jsonl` from --signals S (or --model + --input).

Crash-safe: scores are appended per batch and a rerun resumes after the last complete batch
(`io/resumable.py`); `--on-error skip` sets bad input records aside (`io/rejects.py`). With
--model, the experts run first through `experts`' resumable writer into <out>.signals.jsonl
(same engine options as `experts`), so a killed run redoes no finished pair.
"""
from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("baer_fast")
BATCH = 2048
BATCH_ENV = "BAER_FAST_SCORE_BATCH"   # hidden knob: smaller batches (crash/resume tests)


def add_arguments(p) -> None:
    from baer_fast.io.rejects import add_on_error_argument

    p.add_argument("--head", default=None,
                   help="head artifact written by `baer-fast fit` (default: the label-free default head, as serve "
                        "and Judge use: the mean of the direct and score experts' evidence, no fitting)")
    p.add_argument("--out", required=True, help="scores JSONL to write (resumable)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--signals", help="signals JSONL of the head's condition")
    src.add_argument("--input", help="pairs JSONL, judged with --model first (needs the engine)")
    p.add_argument("--model", help="local judge model folder (with --input only)")
    p.add_argument("--chunk-pairs", type=int, default=16,
                   help="pairs (distinct contents) per durable append of <out>.signals.jsonl; with a cascade head, "
                        "per round of stage 1 then stage 2 on that chunk's open pairs (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="discard an existing --out instead of resuming")
    add_on_error_argument(p)
    from baer_fast.commands.experts import add_engine_arguments
    add_engine_arguments(p)          # --backend, --dtype, --device, --memory-gb, --kernels, ... as `experts`


def batch_size() -> int:
    from baer_fast.errors import InputError

    raw = os.environ.get(BATCH_ENV, "")
    if not raw:
        return BATCH
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"{BATCH_ENV}={raw!r}: expected a positive integer")
    return int(raw)


def _records(args, art, rejects):
    from baer_fast.io.records import read_pairs, read_signals

    if args.signals:
        return read_signals(args.signals, rejects=rejects), args.signals
    pairs = read_pairs(args.input, rejects=rejects)
    return _judge(args, art, pairs, rejects), args.input


def signals_path(out: str, stage: str = "") -> str:
    return out + (f".{stage}" if stage else "") + ".signals.jsonl"


def _judge(args, art, pairs, rejects=None) -> list:
    """The head's experts on the pairs, through `experts`' resumable writer (<out>.signals.jsonl):
    a killed run resumes without redoing finished pairs. Derived experts (PriDe, CalibraEval) use
    the parameters frozen in the artifact, never refitted. A cascade head (early exit) runs its
    cheap stage on every pair and the rest only on the pairs stage 1 leaves open, chunk by chunk,
    each stage through its own resumable file (<out>.stage1/.stage2.signals.jsonl); stage 2 reuses
    stage 1's runs and prompt-prefix KV (commands/stream.stream_staged). A head pruned per subset
    runs each group of subsets with the same experts through <out>.subset<k>.signals.jsonl."""
    from baer_fast import protocols
    from baer_fast.errors import InputError
    from baer_fast.runtime.model.load import check_device, check_model_dir

    if args.chunk_pairs < 1:
        raise InputError("must be at least 1", field="--chunk-pairs")
    protocols.check_runnable(art["experts"], "a local judge model (score --model)", args.head)
    check_model_dir(args.model)
    check_device(args.device)
    args.keep_texts = False
    from baer_fast.bank.runner import resolve_experts
    from baer_fast.commands import experts
    names = resolve_experts(list(art["experts"]))
    # the budgets and seed the head's signals were made with, unless the flags say otherwise
    args.generation = experts.generation_config(args, names, art.get("generation"))
    # cut once for the head's whole bank (--truncate), or over-long pairs: a located error, or rejects
    pairs = experts.fit_context(args, pairs, names, rejects)
    cascade = art.get("cascade")
    if art.get("allocation") is not None:    # pruned per subset: each subset's experts on its own pairs
        from baer_fast.selection.allocation import run_allocated, unpruned_note
        if (note := unpruned_note(art, pairs)) is not None:
            log.warning("%s; give those pairs a 'subset' field the head knows to run only its experts", note)
        return run_allocated(art, pairs, lambda some, names, k: _bank(args, art, some, names, f"subset{k}"))
    if not cascade:
        return _bank(args, art, pairs, art["experts"], "")
    from baer_fast.commands.stream import stream_staged
    return stream_staged(args, art, pairs, art.get("derived_params") or {}, lambda stage: signals_path(args.out, stage),
                         lambda stage, names: _fingerprint(args, art, names, stage))


def _fingerprint(args, art, names, stage: str) -> dict:
    from baer_fast.commands import experts
    fp = experts.fingerprint(args, names, None)
    fp.update(command="score", head=art["checksum"], stage=stage or None)
    if stage in ("stage1", "stage2"):       # chunk by chunk, stage 1 keeping the prompt KV stage 2 reads
        fp["chunked"] = True
        return _older(args, fp, stage)
    return fp


def _older(args, fp: dict, stage: str) -> dict:
    """fp, or the fingerprint of a stage's file written before the stages ran chunk by chunk (no
    "chunked"): complete, it is read as it is (nothing is left to run, nothing is mixed); in
    progress, it is refused, saying what to do (its floats need not be this version's: stage 1 now
    keeps prompt KV, which moves its waves under a tight --memory-gb; stage 2 reads it)."""
    import json

    from baer_fast.errors import InputError
    from baer_fast.io.resumable import progress_path
    path = signals_path(args.out, stage)
    try:
        with open(progress_path(path), encoding="utf-8") as fh:
            prog = json.load(fh)
        old = {k: v for k, v in prog["fingerprint"].items() if k != "reused"}   # SignalStream adds it again
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return fp                   # none, or unreadable: the writer says what is wrong
    if args.overwrite or "chunked" in old or old != {k: v for k, v in fp.items() if k != "chunked"}:
        return fp
    if prog.get("complete"):
        return old
    if stage == "stage1":
        raise InputError("stage 1 of this run was written by an older baer-fast (keeping no prompt KV), which "
                         "this version does not resume into: pass --overwrite to run every stage again", path=path)
    raise InputError(f"stage 2 of this run was written by an older baer-fast (in one batch after stage 1), "
                     f"which this version (stage 2 chunk by chunk, reading stage 1's prompt KV) does not resume "
                     f"into: delete it and {progress_path(path)} to run stage 2 again (stage 1's file is kept), "
                     f"or pass --overwrite to run every stage again", path=path)


def _bank(args, art, pairs, experts_, stage: str) -> list:
    from baer_fast import protocols
    from baer_fast.bank.runner import resolve_experts
    from baer_fast.commands.stream import stream_signals
    from baer_fast.io.records import read_signals

    names = resolve_experts(list(experts_))
    derived = [n for n in names if n in protocols.DERIVED_EXPERTS]
    target = signals_path(args.out, stage)
    fp = _fingerprint(args, art, names, stage)
    print(stream_signals(args, pairs, names, derived, art.get("derived_params") or {}, target, fp), file=sys.stderr)
    by_id = {s.id: s for s in read_signals(target)}
    return [by_id[p.id] for p in pairs]


def _writer(args, art):
    """The resumable scores file: what it holds must come from this head, on this input (and model)."""
    from baer_fast.io.resumable import ResumableWriter, file_sha256
    fingerprint = {"command": "score", "input_sha256": file_sha256(args.signals or args.input), "head": art["checksum"]}
    if (art.get("fitted_on") or {}).get("split"):      # eval without --head then evaluates on the head's split
        fingerprint["split"] = art["fitted_on"]["split"]
    if args.input:      # the judge made the evidence: another model's scores must not be mixed in
        fingerprint["model"] = os.path.abspath(args.model)
    return ResumableWriter(args.out, fingerprint=fingerprint, overwrite=args.overwrite)


def run(args) -> int:
    from baer_fast import artifact
    from baer_fast.errors import InputError
    from baer_fast.io.rejects import rejects_for, report_rejects
    from baer_fast.progress import progress
    from baer_fast.scoring import check_experts, missing_evidence, score_records

    step = batch_size()
    if args.head is None:
        art = artifact.default_artifact()
        log.warning("no --head: scoring with the label-free default head (%s); a head fitted on labelled pairs "
                    "of the condition with `baer-fast fit` is what BAER deploys", ", ".join(art["experts"]))
    else:
        art = artifact.load(args.head)
    rejects = rejects_for(args, out=args.out)
    if args.input and not args.model:
        raise InputError("--input needs --model (the judge that produces the signals)", field="--model")
    if args.signals and args.model:
        raise InputError("only with --input: --signals are judged already, so the model would not run",
                         field="--model")
    # with --model, --out is opened (so refused, or locked) before the expert work, which can take hours
    early = _writer(args, art) if args.input else None
    try:
        records, where = _records(args, art, rejects)
        if not (args.input and art.get("cascade")):      # a cascade runs stage 2 only where needed
            check_experts(art, records, where)
    except BaseException:
        if early is not None:
            early.discard_if_unused()        # failed before its first score: no output left behind
        raise
    finally:
        report_rejects(rejects)
    with early or _writer(args, art) as out:
        head = artifact.deployed_head(art)
        todo = [r for r in records if r.id not in out.done_ids]
        if out.resumed:
            log.info("resuming %s: %d of %d pairs already scored", args.out, len(out.done_ids), len(records))
        with progress(len(records), desc="score", quiet=args.quiet, initial=len(records) - len(todo)) as bar:
            for i in range(0, len(todo), step):
                batch = todo[i:i + step]
                out.append(score_records(art, batch, head))
                bar.update(len(batch))
        out.finish()
    if args.signals and art.get("cascade"):      # what a run with --model would have skipped
        exits = int(head.exits(records).sum())
        log.info("cascade: %d of %d pairs exit after stage 1 (%.1f%%, tau %.4g); a run with --model runs stage 2 "
                 "on the other %d", exits, len(records), 100 * exits / max(len(records), 1), art["cascade"]["tau"],
                 len(records) - exits)
    n_missing = missing_evidence(art, records)
    skipped = f"; {len(rejects)} bad records skipped -> {rejects.path}" if rejects is not None and len(rejects) else ""
    print(f"{len(records)} pairs scored with head={art['head']} ({art['condition']}) -> {args.out}; "
          f"{n_missing} (pair, expert) cells had no evidence (p=0.5){skipped}")
    return 0
