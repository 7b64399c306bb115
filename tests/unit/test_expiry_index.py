"""The bucket's expiry index value: partition keys packed into one state value."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from materializer.spark.processor import pack_keys, unpack_keys


@given(st.lists(st.binary(max_size=40), max_size=30))
def test_keys_round_trip(pks: list[bytes]) -> None:
    assert unpack_keys(pack_keys(pks)) == pks


def test_empty_keys_and_boundaries_survive() -> None:
    pks = [b"", b"\x00\x00\x00\x04", b"k" * 300]
    packed = pack_keys(pks)
    assert len(packed) == 3 * 4 + 0 + 4 + 300
    assert unpack_keys(packed) == pks
