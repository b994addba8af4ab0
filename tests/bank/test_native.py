"""Native-procedure experts: the verdict the protocol asks the model to write, parsed from the
same texts (no readout, no extra generation), None where none is written."""
from baer_fast import protocols
from baer_fast.protocols import cot, deliberate, self_consistency
from baer_fast.protocols.reasoning import parse_final_verdict, vote


def test_final_verdict_is_the_last_one_written():
    assert parse_final_verdict("A looks fine. Final verdict: B") == "B"
    assert parse_final_verdict("final verdict: **A**. Later: Final Verdict - [B]") == "B"
    assert parse_final_verdict("Final verdict: Response A") == "A"
    assert parse_final_verdict("Final verdict: a tie") is None          # lowercase 'a' is a word
    assert parse_final_verdict("Final verdict: AB") is None and parse_final_verdict("no verdict") is None


def test_cot_native_maps_letters_to_the_canonical_frame():
    # order ab shows a as A, order ba shows a as B
    assert cot.native_runs({"ab": ["Final verdict: A"], "ba": ["Final verdict: A"]}, {}, {}) == [1.0, 0.0]
    assert cot.native_runs({"ab": ["..."], "ba": ["Final verdict: B"]}, {}, {}) == [None, 1.0]


def test_self_consistency_native_is_a_majority_over_parsed_samples():
    texts = {"ab": ["Final verdict: A"] * 2 + ["Final verdict: B", "none", "none"],
             "ba": ["Final verdict: A", "Final verdict: B", "x", "y", "z"]}
    assert self_consistency.native_runs(texts, {}, {}) == [1.0, 0.5]
    assert vote([None, None]) is None and vote([0.0, 0.0, 1.0]) == 0.0


def test_deliberate_native_needs_the_format_it_asks_for():
    import math
    lp = {"ab": [math.log(0.7), math.log(0.3)], "ba": [math.log(0.2), math.log(0.8)]}
    assert deliberate.native_runs({}, {"ab": ["stop"], "ba": ["stop"]}, lp) == [1.0, 1.0]
    assert deliberate.native_runs({}, {"ab": ["length"], "ba": ["eos"]}, lp) == [None, None]


def test_natives_come_with_their_generative_expert():
    assert protocols.with_natives(["direct", "cot"]) == ["direct", "cot", "cot_native"]
    assert protocols.with_natives(["deliberate_native"]) == ["deliberate", "deliberate_native"]
    assert protocols.get("self_consistency_native") is self_consistency
    assert set(protocols.NATIVE) <= set(protocols.ALL)
