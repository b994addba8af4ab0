"""Signals files written chunk by chunk and resumable: the expert work of `experts` and `score --model`.

A SignalStream is one resumable signals file (io/resumable.py) of one bank. `stream_signals` runs
a bank over the pairs in content chunks (bank/canonical.chunks: fixed by the whole input, so a
resumed run's floats are the uninterrupted run's). `stream_staged` runs a cascade head chunk by
chunk: a chunk's stage 1, then stage 2 on the pairs of that chunk stage 1 leaves open, with the
chunk's prompt-prefix KV kept between them (bank/prefix_store.keeping), each stage into its own
file. A chunk whose stage 1 is written but whose stage 2 is not (a kill between them) runs stage 1
again, the same call on the same chunk, for its KV: stage 2's bits are the uninterrupted run's.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

from baer_fast.errors import InputError


def engine_kind(args) -> str:
    return "vllm" if getattr(args, "backend", "hf") == "vllm" else ("naive" if args.naive else "prefix")


def open_from_args(args):
    """The judge engine the flags describe (--backend, --memory-gb, --batch-tokens, --kernels, --naive, ...)."""
    from baer_fast.runtime.config import EngineConfig, memory_bytes
    from baer_fast.runtime.open import HfOptions, engine_from_args, open_engine
    config = EngineConfig(memory_budget_bytes=memory_bytes(args.memory_gb), batch_tokens=args.batch_tokens,
                          kernels=args.kernels)
    return engine_from_args(args, lambda: open_engine(args.model, options=HfOptions(
        engine=config, naive=args.naive, device=args.device, dtype=args.dtype, attn=args.attn,
        trust_remote_code=args.trust_remote_code)))


def close_engine(args, engine) -> None:
    if engine is not None and engine_kind(args) == "vllm":
        engine.close()          # vLLM's engine processes (data-parallel ranks too) stop now, not at exit


def open_writer(path: str, fingerprint: dict, overwrite: bool, args=None):
    """The one place output durability is chosen: the shared resumable writer. The engine settings
    that move only the last bits (batch shapes, kernels, attention, torch's CPU thread count: another
    machine's core count) may change on a resume, warned."""
    from baer_fast.io.resumable import ResumableWriter
    settings = None if args is None else _settings(args)
    return ResumableWriter(path, fingerprint=fingerprint, overwrite=overwrite, settings=settings)


def _settings(args) -> dict:
    import torch            # loaded already: the model runs in this process
    out = {k: getattr(args, k, None) for k in ("chunk_pairs", "memory_gb", "batch_tokens", "kernels", "attn")}
    return {**out, "cpu_threads": torch.get_num_threads()}


class SignalStream:
    """One bank's resumable signals file: rows of `names` less the derived experts `reused` (applied to
    runs given per pair, a cascade's stage 1), derived experts applied with `params`, appended per
    chunk for the pairs the file lacks. --keep-texts: generated texts to <out>.texts.jsonl, first."""

    def __init__(self, args, names, derived, params, target: str, fp: dict, reused=()):
        from baer_fast.bank.runner import RunReport
        self.args, self.names, self.derived, self.params = args, list(names), list(derived), params or {}
        self.reused = list(reused)
        self.run_names = [n for n in names if n not in self.reused]
        if self.reused:         # their cells say "from" the source: a file written recomputing it is not resumed
            fp = {**fp, "reused": self.reused}
        self.report, self.target, self.texts = RunReport(), target, None
        self.seconds, self.again = 0.0, 0      # in rows(); pairs the file held that a chunk ran again
        self.writer = open_writer(target, fp, args.overwrite, args)
        texts_path = args.out + ".texts.jsonl"
        keep = bool(args.keep_texts and args.generation)
        if keep and os.path.exists(texts_path):
            self.texts = open_writer(texts_path, fp, args.overwrite, args)
        done_texts = self.texts.done_ids if self.texts is not None else set()
        if keep and not self.writer.done_ids <= done_texts:
            self.close()
            raise InputError(f"{len(self.writer.done_ids - done_texts)} pairs already in {target} were run without "
                             "--keep-texts, and a resume cannot recover their texts: pass --overwrite to run every "
                             "pair again with it, or resume without it", field="--keep-texts")
        if keep and self.texts is None:
            self.texts = open_writer(texts_path, fp, args.overwrite, args)

    @property
    def done(self) -> set:
        return self.writer.done_ids

    def rows(self, engine, chunk, given=None) -> list[dict]:
        """The chunk's bank rows (runs, counters, per-expert cost without wall time: same bytes run to
        run); given: per pair, runs already computed that the reused experts read."""
        from baer_fast.bank.costs import counted
        from baer_fast.bank.runner import expert_rows, no_rows, with_given
        t0 = time.perf_counter()
        if self.run_names:
            self.again += sum(p.id in self.done for p in chunk)
        rows = counted(expert_rows, engine, chunk, self.run_names, self.report, self.args.generation, timed=False,
                       batch_invariant=self.args.batch_invariant) if self.run_names else no_rows(len(chunk))
        self.seconds += time.perf_counter() - t0
        return with_given(rows, given, self.names, self.reused, timed=False) if given else rows

    def write(self, chunk, rows) -> list:
        """Every chunk pair's Signals; those the file lacks are appended (texts first: a kill between
        the two redoes the chunk, and the texts writer skips it)."""
        from baer_fast.bank.runner import apply_derived, to_signals
        if self.texts is not None:
            self.texts.append([{"id": p.id, "texts": r["texts"]} for p, r in zip(chunk, rows)
                               if p.id not in self.texts.done_ids])
        recs = [to_signals(p, apply_derived(r["runs"], self.derived, self.params), r, self.names,
                           engine_kind(self.args)) for p, r in zip(chunk, rows)]
        self.writer.append([s.to_json() for s in recs if s.id not in self.writer.done_ids])
        return recs

    def _writers(self) -> list:
        return [w for w in (self.writer, self.texts) if w is not None]

    def finish(self, ids) -> None:
        """Put the file(s) back in input order (atomically: the same lines) and mark them complete."""
        ids = list(ids)
        for w in self._writers():
            w.reorder(ids)
            w.finish()

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is not None:        # failed before any result (model load, engine options): leave no
            for w in self._writers():               # output behind that would block the corrected command
                w.discard_if_unused()
        self.close()

    def close(self) -> None:
        for w in self._writers():
            w.close()

    def summary(self, total: int, new: int, seconds: float, label: str = "experts") -> str:
        """The generative experts' cost lines (if any ran), then the run's line: pairs (written now,
        held before; of those, run again with their chunk: the floats of a chunk, or a cascade's
        stage-1 KV), rates over the pairs computed."""
        shared, naive = self.report.prefill_totals()
        ratio = naive / shared if shared else 0.0
        kv = f"KV peak {self.report.stats.kv_bytes_peak / 2**20:.1f} MiB"
        g = self.report.generative
        if g is not None and g.decode_kv_peak is not None:
            kv += f" (engine), {g.decode_kv_peak / 2**20:.1f} MiB (decoder slots)"
        costs = "" if g is None else "generative experts (cost per expert, this run):\n" + "\n".join(g.lines()) + "\n"
        again = f"; {self.again} of those run again with their chunk" if self.again else ""
        return costs + (
            f"{label}: {total} pairs ({new} run, {total - new} already done{again}) in {seconds:.1f}s: "
            f"{(new + self.again) / max(seconds, 1e-9):.2f} pairs/s, {shared / max(seconds, 1e-9):.0f} tokens/s; "
            f"prefilled {shared} tokens vs {naive} naive ({ratio:.2f}x fewer); {kv}")


def stream_signals(args, pairs, names, derived, params, target, fp) -> str:
    """The bank `names` over the pairs into `target` -> the run's summary line. The engine is opened
    when there is work, and closed at the end."""
    from baer_fast.bank.canonical import chunks
    from baer_fast.progress import progress

    engine = None
    with SignalStream(args, names, derived, params, target, fp) as out:
        # chunks of distinct contents in content order, fixed by the whole input (not by what a resumed
        # run has left), so every pair's floats are those of the uninterrupted run
        work = [c for c in chunks(pairs, args.chunk_pairs) if any(p.id not in out.done for p in c)]
        todo = [p for c in work for p in c if p.id not in out.done]
        try:
            if todo and out.run_names:
                engine = open_from_args(args)
            t0 = time.perf_counter()        # throughput excludes model loading
            with progress(len(todo), desc="experts", quiet=args.quiet or not todo) as bar:
                for chunk in work:
                    n = sum(p.id not in out.done for p in chunk)
                    out.write(chunk, out.rows(engine, chunk))
                    rate = out.report.prefill_totals()[0] / max(time.perf_counter() - t0, 1e-9)
                    bar.set_postfix_str(f"{rate:.0f} tok/s")
                    bar.update(n)
            out.finish(p.id for p in pairs)
        finally:
            close_engine(args, engine)
        return out.summary(len(pairs), len(todo), time.perf_counter() - t0)


def stream_staged(args, art, pairs, params, target, fp) -> list:
    """A cascade head's experts over the pairs, chunk by chunk (module docstring) -> merged Signals in
    input order. target(stage), fp(stage, names): each stage's file and fingerprint."""
    from baer_fast import protocols
    from baer_fast.bank.canonical import chunks
    from baer_fast.bank.prefix_store import keeping, worth_keeping
    from baer_fast.bank.runner import free_sources, resolve_experts, stage_experts
    from baer_fast.io.records import read_signals
    from baer_fast.progress import progress
    from baer_fast.selection.cascade import log_staged, merge, run_staged, stage1_head, stage1_run, staged_report

    names, rest, second = stage_experts(stage1_run(art, free_sources), art["experts"], art["cascade"]["stage1_experts"])
    head, engine = stage1_head(art), None
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(SignalStream(args, names, [n for n in names if n in protocols.DERIVED_EXPERTS],
                                               params, target("stage1"), fp("stage1", names)))
        two = stack.enter_context(SignalStream(
            args, rest, [n for n in rest if n in protocols.DERIVED_EXPERTS], params, target("stage2"),
            fp("stage2", rest), [n for n in rest if n not in second])) if rest else None
        old = {s.id: s for s in read_signals(one.target)} if one.done else {}
        before = [len(s.done) for s in (one, two) if s is not None]

        def finished(chunk) -> bool:         # stage 1 in its file, and stage 2 for every pair it left open
            if not all(p.id in one.done for p in chunk):
                return False
            exits = head.exits([old[p.id] for p in chunk])
            return two is None or all(p.id in two.done for p, e in zip(chunk, exits) if not e)

        def run(some, experts, given=None):
            stream = one if given is None else two
            if resolve_experts(experts) != stream.names:
                raise RuntimeError(f"cascade stage asked for {experts}; its file holds {stream.names}")
            recs = stream.write(some, stream.rows(engine, some, given))
            # a stage-1 rerun (for its KV) under other settings may move last bits: exits and stage 2's
            # given runs are those of the file, which the merged output reads
            return [old.get(r.id, r) for r in recs] if given is None else recs

        work = [c for c in chunks(pairs, args.chunk_pairs) if not finished(c)]
        try:
            if work:
                engine = open_from_args(args)
            # no store where no stage 2 would read it (stage 1 holds every expert, a generative stage)
            keep = None if args.batch_invariant or not worth_keeping(names, second) else (lambda: keeping(engine))
            with progress(sum(map(len, work)), desc="cascade", quiet=args.quiet or not work) as bar:
                for chunk in work:
                    run_staged(art, chunk, run, free_sources, keep, report=False)
                    bar.update(len(chunk))
            for stream in (one, two):
                if stream is not None:
                    stream.finish(p.id for p in pairs)
        finally:
            close_engine(args, engine)
        for k, (stream, was) in enumerate(zip((one, two), before), start=1):
            if stream.done:         # a stage 2 every pair skipped has nothing to say
                print(stream.summary(len(stream.done), len(stream.done) - was, stream.seconds,
                                     f"experts (stage {k})"), file=sys.stderr)
    first = {s.id: s for s in read_signals(target("stage1"))}
    # every pair may exit: stage 2's file is then complete and empty, which read_signals refuses
    second = {s.id: s for s in read_signals(target("stage2"))} if two is not None and two.done else {}
    out = [merge(first[p.id], second[p.id]) if p.id in second else first[p.id] for p in pairs]
    log_staged(staged_report(out, head.exits([first[p.id] for p in pairs])))
    return out
