"""PandaLM test set (WeOpenML/PandaLM) + GPT-3.5 and PandaLM-7B verdicts -> one bank.

Label = majority of the three annotators (1 = response1, 2 = response2, 0 = tie; no
majority -> tie). The judges ran in one display order only, so each expert has one run
(position bias included; the file records it as order "ab"). Verdicts match pairs by `idx`;
under skip a rejected pair record is left out, a rejected verdict record leaves its run missing.
"""
from __future__ import annotations

from collections import Counter

from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import need_dir, one_file
from baer_fast.io.adapters._rows import collect, json_rows, need_pairs
from baer_fast.io.records import Pair

_LABEL = {1: "a", 2: "b", 0: "tie"}
_GPT = {"1": 1.0, "2": 0.0, "Tie": 0.5}
_PANDA = {1: 1.0, 2: 0.0, 0: 0.5}


def majority(votes) -> str:
    (top, n), = Counter(votes).most_common(1)
    return _LABEL.get(top, "tie") if n >= 2 else "tie"


def _pair(row) -> Pair:
    extra = row.obj.get("input")
    question = row.need("instruction") + (f"\n\n{extra}" if isinstance(extra, str) and extra else "")
    label = majority([row.need(f"annotator{k}", int) for k in (1, 2, 3)])
    return Pair(f"pandalm-{row.need('idx', int):04d}", question, row.need("response1"), row.need("response2"),
                label=label, subset=row.obj.get("motivation_app") or "default",
                meta={"cmp_key": row.obj.get("cmp_key")})


def _pairs(data_path: str, rejects) -> list:
    return collect(json_rows(data_path, rejects), _pair, rejects, id_field="idx")[0]


def load(src: str, *, rejects=None, options=None) -> Imported:
    need_dir(src, "PandaLM testset-v1*.json and the judge files")
    data_path = one_file(src, "testset-v1*.json")
    pairs = _pairs(data_path, rejects)
    need_pairs(pairs, {}, rejects)
    index = {int(p.id.split("-")[1]): i for i, p in enumerate(pairs)}
    experts = {}
    for name, pattern, key, table in (("gpt-3.5-turbo", "gpt-3.5-turbo-testset*.json", "gpt_result", _GPT),
                                      ("pandalm-7b", "pandalm-7b-testset*.json", "pandalm_result", _PANDA)):
        runs = [[None] for _ in pairs]
        for row in json_rows(one_file(src, pattern), rejects):
            idx, verdict = row.obj.get("idx"), row.obj.get(key)
            if type(idx) is int and idx in index and type(verdict) in (int, str):
                runs[index[idx]] = [table.get(verdict)]
        experts[name] = runs
    out = Imported(pairs, {"pandalm-bank": bank_signals(pairs, experts, "pandalm-bank")})
    n_tie = sum(p.label == "tie" for p in pairs)
    out.notes.append(f"pandalm: {len(pairs)} pairs ({n_tie} tie labels, kept but excluded from accuracy); "
                     "judges ran in one display order only")
    return out
