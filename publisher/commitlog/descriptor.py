"""The commit log descriptor: version, segment id and parameters at the head of a segment."""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from publisher.commitlog.errors import CorruptSegmentError, UnsupportedSegmentError

SUPPORTED_VERSIONS = {7: 12, 8: 13}  # descriptor version -> messaging version
_NAME = re.compile(r"^CommitLog-(\d+)-(\d+)\.log$")
_FIXED = struct.Struct(">iqH")
COMPRESSOR_PREFIX = "org.apache.cassandra.io.compress."


@dataclass(frozen=True)
class Descriptor:
    """What a segment's header says about it."""

    version: int
    segment_id: int
    header_length: int
    parameters: dict = field(default_factory=dict)

    @property
    def messaging_version(self) -> int:
        """12 for descriptor 7 (4.0 to 5.0 default), 13 for descriptor 8 (5.0 NONE/UPGRADING)."""
        return SUPPORTED_VERSIONS[self.version]

    @property
    def compressor(self) -> str | None:
        """Short compressor class name (LZ4Compressor, ...) or None for plain segments."""
        name = self.parameters.get("compressionClass")
        if not name:
            return None
        return name[len(COMPRESSOR_PREFIX):] if name.startswith(COMPRESSOR_PREFIX) else name

    @property
    def encrypted(self) -> bool:
        """True when the segment uses transparent data encryption."""
        return bool(self.parameters.get("encKeyAlias") and self.parameters.get("encCipher"))


def parse_name(path: Path) -> tuple[int, int] | None:
    """(version, segment id) from a `CommitLog-<v>-<id>.log` name, or None."""
    match = _NAME.match(path.name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_descriptor(head: bytes, path: str = "<segment>") -> Descriptor:
    """Parse and CRC-check the header at the start of a segment (`head`: its first bytes)."""
    if len(head) < _FIXED.size:
        raise CorruptSegmentError(path, 0, f"truncated header ({len(head)} bytes)")
    version, segment_id, plen = _FIXED.unpack_from(head, 0)
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedSegmentError(
            path, 0, f"commit log descriptor version {version} is not supported "
                     f"(this reader handles {sorted(SUPPORTED_VERSIONS)}: Cassandra 4.0-5.0)")
    end = _FIXED.size + plen
    if len(head) < end + 4:
        raise CorruptSegmentError(path, 0, "truncated header parameters")
    params_raw = bytes(head[_FIXED.size:end])
    crc = zlib.crc32(struct.pack(">iIIi", version, segment_id & 0xFFFFFFFF,
                                 (segment_id >> 32) & 0xFFFFFFFF, plen) + params_raw)
    (stored,) = struct.unpack_from(">I", head, end)
    if crc != stored:
        raise CorruptSegmentError(path, 0, f"header CRC mismatch (stored {stored:#010x}, "
                                           f"computed {crc:#010x})")
    try:
        params = json.loads(params_raw.decode("utf-8")) if params_raw else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptSegmentError(path, _FIXED.size, f"header parameters are not JSON: {exc}")\
            from exc
    if not isinstance(params, dict):
        raise CorruptSegmentError(path, _FIXED.size, "header parameters are not a JSON object")
    return Descriptor(version, segment_id, end + 4, params)
