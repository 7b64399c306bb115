"""Which Kafka partition a key goes to: the partitioners a publisher's producer may use
(librdkafka's `partitioner` setting), for tools that must move state with its keys.

librdkafka's default, consistent_random, is CRC-32 of the key modulo the partition count
(the random part is for keys that are empty, which raw records never have); murmur2_random
is the Java client's default, Kafka's murmur2 with the sign bit cleared. The integration
tests hold both to a real producer.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's consistent (and consistent_random) partitioner."""
    return zlib.crc32(key) % partitions


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (Utils.murmur2, seed 0x9747b28c), as an unsigned 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length - length % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The Java client's default (and librdkafka's murmur2/murmur2_random) partitioner."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


PARTITIONERS: dict[str, Callable[[bytes, int], int]] = {
    "consistent_random": crc32_partition, "consistent": crc32_partition,
    "murmur2_random": murmur2_partition, "murmur2": murmur2_partition,
}


def partitioner(name: str) -> Callable[[bytes, int], int]:
    """The partition function of a librdkafka `partitioner` name (ValueError if unknown)."""
    try:
        return PARTITIONERS[name]
    except KeyError:
        raise ValueError(f"unknown partitioner {name!r}: one of "
                         f"{', '.join(sorted(PARTITIONERS))}") from None
