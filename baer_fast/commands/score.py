"""`baer-fast score --head head.json --out scores.jsonl` from --signals S (or --model + --input).

Crash-safe: scores are appended per batch and a rerun resumes after the last complete batch.
"""
from __future__ import annotations

import logging
import sys

log = logging.getLogger("baer_fast")
BATCH = 2048


def add_arguments(p) -> None:
    p.add_argument("--head", required=True, help="head artifact written by `baer-fast fit`")
    p.add_argument("--out", required=True, help="scores JSONL to write (resumable)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--signals", help="signals JSONL of the head's condition")
    src.add_argument("--input", help="pairs JSONL, judged with --model first (needs the engine)")
    p.add_argument("--model", help="local judge model folder (with --input)")
    p.add_argument("--kernels", default="auto", choices=("auto", "triton", "torch"))
    p.add_argument("--overwrite", action="store_true", help="discard an existing --out instead of resuming")


def _records(args, art):
    from baer_fast.errors import InputError
    from baer_fast.io.records import read_pairs, read_signals

    if args.signals:
        return read_signals(args.signals), args.signals
    if not args.model:
        raise InputError("--input needs --model (the judge that produces the signals)")
    from baer_fast.runtime.runner import run_experts

    pairs = read_pairs(args.input)
    return run_experts(args.model, pairs, experts=art["experts"], kernels=args.kernels), args.input


def run(args) -> int:
    from tqdm import tqdm

    from baer_fast import artifact
    from baer_fast.io.resumable import ResumableWriter, file_sha256
    from baer_fast.scoring import check_experts, missing_evidence, score_records

    art = artifact.load(args.head)
    records, where = _records(args, art)
    check_experts(art, records, where)
    head = artifact.deployed_head(art)
    fingerprint = {"command": "score", "input_sha256": file_sha256(where), "head": art["checksum"]}
    with ResumableWriter(args.out, fingerprint=fingerprint, overwrite=args.overwrite) as out:
        todo = [r for r in records if r.id not in out.done_ids]
        if out.resumed:
            log.info("resuming %s: %d of %d pairs already scored", args.out, len(out.done_ids), len(records))
        bar = tqdm(total=len(records), initial=len(records) - len(todo), unit="pair", file=sys.stderr,
                   disable=args.quiet or None, desc="score")
        for i in range(0, len(todo), BATCH):
            batch = todo[i:i + BATCH]
            out.append(score_records(art, batch, head))
            bar.update(len(batch))
        bar.close()
        out.finish()
    n_missing = missing_evidence(art, records)
    print(f"{len(records)} pairs scored with head={art['head']} ({art['condition']}) -> {args.out}; "
          f"{n_missing} (pair, expert) cells had no evidence (p=0.5)")
    return 0
