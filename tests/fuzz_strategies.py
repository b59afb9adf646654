"""Hypothesis strategies shared by the property tests (tests/test_fuzz_*.py)."""

from __future__ import annotations

from hypothesis import strategies as st

scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=12)


def json_values(keys=None, max_leaves: int = 25):
    """Arbitrary JSON (dicts keyed by `keys`, a strategy, mixed with random text keys)."""
    key = st.text(max_size=8) if keys is None else (keys | st.text(max_size=6))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key, inner, max_size=5),
                        max_leaves=max_leaves)


def words(*names: str):
    return st.sampled_from(names)
