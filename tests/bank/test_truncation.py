from hypothesis import given, settings, strategies as st

from baer_fast.bank.truncation import sanitize, shared_cap


@settings(max_examples=500)
@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(1, 4000))
def test_shared_cap_fits_and_is_symmetric(la, lb, room):
    t = shared_cap(la, lb, room)
    assert t == shared_cap(lb, la, room)
    assert min(la, t) + min(lb, t) <= room
    # maximal: one more token would not fit (unless both already fit whole)
    if min(la, t + 1) + min(lb, t + 1) > min(la, t) + min(lb, t):
        assert min(la, t + 1) + min(lb, t + 1) > room


def test_sanitize_repairs_lone_surrogates_only():
    assert sanitize("plain é 😀") == "plain é 😀"
    fixed = sanitize("a\udcffb")
    fixed.encode("utf-8")
    assert fixed.startswith("a") and fixed.endswith("b")
