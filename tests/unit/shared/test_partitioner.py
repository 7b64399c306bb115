"""The partitioners a publisher's producer may use (the integration tests hold them to a real
librdkafka producer); murmur2 against the vectors of Kafka's own UtilsTest."""

from __future__ import annotations

import zlib

import pytest

from shared.partitioner import crc32_partition, murmur2, murmur2_partition, partitioner

KAFKA_VECTORS = {"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
                 "a-little-bit-longer-string": -1486304829,
                 "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
                 "abc": 479470107}


def test_murmur2_matches_kafkas_vectors() -> None:
    for text, want in KAFKA_VECTORS.items():
        assert murmur2(text.encode()) == want & 0xFFFFFFFF, text


def test_partitions_by_name() -> None:
    key = b"\x00\x00\x00\x07"
    assert partitioner("consistent_random")(key, 6) == zlib.crc32(key) % 6
    assert partitioner("murmur2_random") is murmur2_partition
    assert 0 <= crc32_partition(key, 5) < 5 and 0 <= murmur2_partition(key, 5) < 5
    with pytest.raises(ValueError, match="unknown partitioner 'fnv1a'"):
        partitioner("fnv1a")
