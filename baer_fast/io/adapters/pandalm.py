"""PandaLM test set (WeOpenML/PandaLM) + GPT-3.5 and PandaLM-7B verdicts -> one bank.

Label = majority of the three annotators (1 = response1, 2 = response2, 0 = tie; no
majority -> tie). The judges ran in one display order only, so each expert has one run
(position bias included; the file records it as order "ab").
"""
from __future__ import annotations

from collections import Counter

from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import need_dir, one_file, read_json
from baer_fast.io.records import Pair

_LABEL = {1: "a", 2: "b", 0: "tie"}
_GPT = {"1": 1.0, "2": 0.0, "Tie": 0.5}
_PANDA = {1: 1.0, 2: 0.0, 0: 0.5}


def majority(votes) -> str:
    (top, n), = Counter(votes).most_common(1)
    return _LABEL.get(top, "tie") if n >= 2 else "tie"



def load(src: str) -> Imported:
    need_dir(src, "PandaLM testset-v1*.json and the judge files")
    rows = read_json(one_file(src, "testset-v1*.json"))
    pairs = []
    for r in rows:
        question = r["instruction"] + (f"\n\n{r['input']}" if r.get("input") else "")
        label = majority([r["annotator1"], r["annotator2"], r["annotator3"]])
        pairs.append(Pair(f"pandalm-{r['idx']:04d}", question, r["response1"], r["response2"],
                          label=label, subset=r.get("motivation_app") or "default",
                          meta={"cmp_key": r.get("cmp_key")}))
    index = {int(p.id.split("-")[1]): i for i, p in enumerate(pairs)}
    experts = {}
    for name, pattern, key, table in (("gpt-3.5-turbo", "gpt-3.5-turbo-testset*.json", "gpt_result", _GPT),
                                      ("pandalm-7b", "pandalm-7b-testset*.json", "pandalm_result", _PANDA)):
        runs = [[None] for _ in pairs]
        for r in read_json(one_file(src, pattern)):
            if r["idx"] in index:
                runs[index[r["idx"]]] = [table.get(r.get(key))]
        experts[name] = runs
    out = Imported(pairs, {"pandalm-bank": bank_signals(pairs, experts, "pandalm-bank")})
    n_tie = sum(p.label == "tie" for p in pairs)
    out.notes.append(f"pandalm: {len(pairs)} pairs ({n_tie} tie labels, kept but excluded from accuracy); "
                     "judges ran in one display order only")
    return out
