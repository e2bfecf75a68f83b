"""The compiled path writes audit records as Python's `json.dumps` does (native/src/engine/pyjson).

The planned decisions' and tallies' audit records are bytes in the audit topic; the compiled
owner writes them itself. Any JSON value — floats across every range `repr` formats
differently (positional, `1e+16`, `1e-05`, `-0.0`, NaN and the infinities), integers past i64,
strings of any Unicode with control characters and astral characters, nested objects in
their order — is written back exactly as `json.dumps` writes it. (NaN and the infinities are
not JSON: the engine never makes one, and its programs refuse them.)
"""

from __future__ import annotations

import json
from typing import Any

import offsetd_native
from hypothesis import given, settings
from hypothesis import strategies as st

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(VALUES)
@settings(max_examples=600)
def test_any_value_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert offsetd_native.json_dumps(json.dumps(value)) == json.dumps(value)


def test_floats_in_every_range_repr_writes_differently() -> None:
    for value in (
        0.0,
        -0.0,
        1.0,
        2.5,
        0.1,
        1e-4,
        9.99e-5,
        1e-5,
        1.5e-7,
        1e15,
        1e16,
        1.7e308,
        123456789.123,
        5e-324,
        2**53 + 0.0,
        -3.25e22,
    ):
        assert offsetd_native.json_dumps(json.dumps([value])) == json.dumps([value]), value
