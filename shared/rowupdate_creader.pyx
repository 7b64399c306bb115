# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The RowUpdate reader of shared.rowupdate_reader, compiled: the same dicts and the same
errors (a unit test holds the two equal on fixture, random and damaged records).

Why compiled: the pure-Python reader makes some 60 calls per record and was a fifth of the
materializer's Python time per change (35 of 162 µs in `bench_partition_merge`, before this
reader; its share now: docs/benchmarks.md "Where a change's time goes", raw record
decoding). Built by setup.py when the install has a C compiler; without one,
shared.rowupdate_reader uses its Python twin.
"""

from libc.stdint cimport int64_t, uint64_t

from shared.rowupdate import KINDS

cdef tuple _KINDS = tuple(KINDS)
cdef Py_ssize_t _N_KINDS = len(KINDS)
cdef dict _STRINGS = {}  # names repeat in every record: decode each once
cdef int64_t _INT64_MIN = -9223372036854775807 - 1


cdef struct Cursor:
    const unsigned char* buf
    Py_ssize_t n
    Py_ssize_t p


cdef inline int _byte(Cursor* c) except -1:
    if c.p >= c.n:
        raise IndexError(f"read past the end of the value at {c.p}")
    c.p += 1
    return c.buf[c.p - 1]


cdef int _varint(Cursor* c, uint64_t* out) except -1:
    """0: `out` holds the varint; 1: it needs more than 64 bits (the cursor is back at its
    start, for _big_long)."""
    cdef Py_ssize_t start = c.p
    cdef uint64_t n = 0
    cdef int shift = 0
    cdef int byte
    while True:
        byte = _byte(c)
        if shift > 63 or (shift == 63 and byte & 0x7E):
            c.p = start
            return 1
        n |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            out[0] = n
            return 0
        shift += 7


cdef object _big_long(Cursor* c):
    """A varint beyond 64 bits, as the pure reader reads it (a Python int of any size)."""
    cdef int byte = _byte(c)
    cdef object n = byte & 0x7F
    cdef object shift = 7
    while byte & 0x80:
        byte = _byte(c)
        n |= (byte & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1)


cdef inline int64_t _zigzag(uint64_t n):
    return <int64_t>(n >> 1) ^ -(<int64_t>(n & 1))


cdef object _long(Cursor* c):
    cdef uint64_t n
    if _varint(c, &n):
        return _big_long(c)
    return _zigzag(n)


cdef int64_t _small(Cursor* c) except? -1:
    """A length, count or enum index: one beyond 64 bits cannot be right."""
    cdef uint64_t n
    if _varint(c, &n):
        raise ValueError(f"a length or count beyond 64 bits at {c.p}")
    return _zigzag(n)


cdef bytes _raw(Cursor* c):
    cdef int64_t n = _small(c)
    if n < 0 or n > c.n - c.p:
        raise ValueError(f"bytes length {n} at {c.p} beyond the value")
    out = (<const char*>c.buf)[c.p:c.p + n]
    c.p += n
    return out


cdef str _string(Cursor* c):
    key = _raw(c)
    s = _STRINGS.get(key)
    if s is None:
        s = key.decode()
        if len(_STRINGS) < 100_000:
            _STRINGS[key] = s
    return s


cdef inline int _union(Cursor* c) except -1:
    """[null, T]: branch 0 is one byte 0x00, branch 1 is 0x02."""
    cdef int v = _byte(c)
    if v == 2:
        return 1
    if v:
        raise ValueError(f"union branch byte {v} at {c.p - 1}")
    return 0


cdef inline bint _boolean(Cursor* c) except -1:
    cdef int v = _byte(c)
    if v > 1:
        raise ValueError(f"boolean byte {v} at {c.p - 1}")
    return v == 1


cdef int64_t _count(Cursor* c) except? -1:
    cdef int64_t n = _small(c)
    if n < 0:  # a block with its byte size: the size is only a skip hint
        _long(c)
        if n == _INT64_MIN:
            raise ValueError(f"block count beyond the value at {c.p}")
        n = -n
    return n


cdef list _values(Cursor* c):
    cdef list out = []
    cdef int64_t n, i
    while True:
        n = _count(c)
        if n == 0:
            return out
        for i in range(n):
            out.append(_raw(c) if _union(c) else None)


cdef object _opt_long(Cursor* c):
    return _long(c) if _union(c) else None


def read(bytes b, Py_ssize_t start):
    """(the RowUpdate dict, the offset after it) of the Avro at `start` of `b`."""
    cdef Cursor cur
    cdef Cursor* c = &cur
    cdef int64_t n, i, kind
    cdef dict rec, cell
    cdef list cells, deletions
    cur.buf = <const unsigned char*>b
    cur.n = len(b)
    if start < 0 or cur.n < start + 16:
        raise ValueError("shorter than a table id")
    rec = {"table_id": b[start:start + 16]}
    cur.p = start + 16
    rec["keyspace"] = _string(c)
    rec["table"] = _string(c)
    rec["schema_hash"] = _string(c)
    rec["partition_key"] = _raw(c)
    rec["clustering"] = _values(c)
    kind = _small(c)
    if not 0 <= kind < _N_KINDS:
        raise ValueError(f"kind {kind}")
    rec["kind"] = _KINDS[kind]
    if _union(c):
        deletion = {"marked_for_delete_at": _long(c)}
        deletion["local_deletion_time"] = _opt_long(c)
        rec["deletion"] = deletion
    else:
        rec["deletion"] = None
    rec["shadowable"] = _boolean(c)
    if _union(c):
        rng = {"start": _values(c)}
        rng["start_inclusive"] = _boolean(c)
        rng["end"] = _values(c)
        rng["end_inclusive"] = _boolean(c)
        rec["range"] = rng
    else:
        rec["range"] = None
    if _union(c):
        liveness = {"timestamp": _long(c)}
        liveness["ttl"] = _long(c)
        liveness["local_expiration_time"] = _opt_long(c)
        rec["liveness"] = liveness
    else:
        rec["liveness"] = None
    cells = []
    while True:
        n = _count(c)
        if n == 0:
            break
        for i in range(n):
            cell = {"column": _string(c)}
            cell["path"] = _raw(c) if _union(c) else None
            cell["value"] = _raw(c) if _union(c) else None
            cell["timestamp"] = _long(c)
            cell["ttl"] = _long(c)
            cell["local_deletion_time"] = _opt_long(c)
            cell["tombstone"] = _boolean(c)
            cells.append(cell)
    rec["cells"] = cells
    deletions = []
    while True:
        n = _count(c)
        if n == 0:
            break
        for i in range(n):
            cell = {"column": _string(c)}
            cell["marked_for_delete_at"] = _long(c)
            cell["local_deletion_time"] = _opt_long(c)
            deletions.append(cell)
    rec["complex_deletions"] = deletions
    source = {"host": _string(c)}
    source["datacenter"] = _string(c)
    source["file"] = _string(c)
    source["segment_id"] = _long(c)
    source["position"] = _long(c)
    source["index"] = _long(c)
    source["commitlog_version"] = _long(c)
    source["messaging_version"] = _long(c)
    rec["source"] = source
    return rec, cur.p
