"""CQL types as `system_schema` spells them, with the facts a decoder needs about each.

`parse_cql_type("frozen<map<text, frozen<list<int>>>>", udts)` gives a CqlType tree that
knows its serialized length rule (fixed or length-prefixed) and whether it is multi-cell
(a non-frozen collection or UDT, stored as one cell per element).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Fixed serialized lengths (db/marshal valueLengthIfFixed); every other type is prefixed.
FIXED_LENGTHS = {
    "boolean": 1, "int": 4, "bigint": 8, "float": 4, "double": 8, "timestamp": 8,
    "uuid": 16, "timeuuid": 16, "empty": 0,
}
SCALARS = frozenset({
    "ascii", "bigint", "blob", "boolean", "counter", "date", "decimal", "double", "duration",
    "float", "inet", "int", "smallint", "text", "time", "timestamp", "timeuuid", "tinyint",
    "uuid", "varint", "empty",
})
ALIASES = {"varchar": "text"}
# Java marshal classes that system tables or old schemas may name in quotes.
MARSHAL_CLASSES = {
    "AsciiType": "ascii", "LongType": "bigint", "BytesType": "blob", "BooleanType": "boolean",
    "CounterColumnType": "counter", "SimpleDateType": "date", "DecimalType": "decimal",
    "DoubleType": "double", "DurationType": "duration", "FloatType": "float",
    "InetAddressType": "inet", "Int32Type": "int", "ShortType": "smallint", "UTF8Type": "text",
    "TimeType": "time", "TimestampType": "timestamp", "DateType": "timestamp",
    "TimeUUIDType": "timeuuid", "ByteType": "tinyint", "UUIDType": "uuid",
    "IntegerType": "varint", "EmptyType": "empty", "LexicalUUIDType": "uuid",
}
_TOKEN = re.compile(
    r"\s*(?:('(?:[^']|'')*')|(\"(?:[^\"]|\"\")*\")|([A-Za-z_][\w.]*)|(\d+)|([<>,]))")


class CqlTypeError(ValueError):
    """A type string that cannot be parsed, or names a type with no decoding rule."""


@dataclass(frozen=True, slots=True)
class CqlType:
    """One CQL type: a scalar, a collection, a tuple, a UDT or a vector."""

    name: str  # scalar name, or list/set/map/tuple/udt/vector
    params: tuple[CqlType, ...] = ()
    frozen: bool = False
    dimension: int = 0  # vector<T, n>
    keyspace: str = ""  # UDTs
    udt_name: str = ""
    field_names: tuple[str, ...] = ()

    @property
    def is_multicell(self) -> bool:
        """Stored as one cell per element/field (non-frozen list, set, map or UDT)."""
        return not self.frozen and self.name in ("list", "set", "map", "udt")

    @property
    def is_collection(self) -> bool:
        """A list, set or map (frozen or not)."""
        return self.name in ("list", "set", "map")

    @property
    def fixed_length(self) -> int:
        """Serialized size when it is the same for every value, else -1 (length-prefixed)."""
        if self.name in FIXED_LENGTHS:
            return FIXED_LENGTHS[self.name]
        if self.name == "vector":
            element = self.params[0].fixed_length
            return element * self.dimension if element >= 0 else -1
        return -1

    def cql(self) -> str:
        """The type as CQL text (frozen<> kept where it matters)."""
        if self.name == "udt":
            text = self.udt_name
        elif self.name == "vector":
            text = f"vector<{self.params[0].cql()}, {self.dimension}>"
        elif self.params:
            text = f"{self.name}<{', '.join(p.cql() for p in self.params)}>"
        else:
            text = self.name
        frozen_matters = self.name in ("list", "set", "map", "udt")
        return f"frozen<{text}>" if self.frozen and frozen_matters else text


def parse_cql_type(text: str, keyspace: str = "",
                   udts: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> CqlType:
    """Parse a type string from system_schema; `udts` maps UDT name → [(field, type text)]."""
    tokens = _tokenize(text)
    parser = _Parser(tokens, text, keyspace, udts or {})
    result = parser.type_(frozen=False)
    if parser.pos != len(tokens):
        raise CqlTypeError(f"trailing text in type {text!r}")
    return result


def _tokenize(text: str) -> list[str]:
    tokens = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            raise CqlTypeError(f"cannot parse type {text!r} at {pos}")
        tokens.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[str], text: str, keyspace: str,
                 udts: Mapping[str, Sequence[tuple[str, str]]]) -> None:
        self.tokens, self.text, self.keyspace, self.udts = tokens, text, keyspace, udts
        self.pos = 0
        self.resolving: tuple[str, ...] = ()

    def _next(self) -> str:
        if self.pos >= len(self.tokens):
            raise CqlTypeError(f"unexpected end of type {self.text!r}")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _expect(self, token: str) -> None:
        got = self._next()
        if got != token:
            raise CqlTypeError(f"expected {token!r}, got {got!r} in type {self.text!r}")

    def _args(self) -> list[CqlType]:
        self._expect("<")
        args = [self.type_(frozen=False)]
        while self.tokens[self.pos:self.pos + 1] == [","]:
            self.pos += 1
            args.append(self.type_(frozen=False))
        self._expect(">")
        return args

    def type_(self, frozen: bool) -> CqlType:
        token = self._next()
        if token.startswith("'"):
            return _marshal(token[1:-1].replace("''", "'"), frozen)
        name = token.lower() if not token.startswith('"') else token[1:-1].replace('""', '"')
        name = ALIASES.get(name, name)
        if name == "frozen" and not token.startswith('"'):
            self._expect("<")
            inner = self.type_(frozen=True)
            self._expect(">")
            return inner
        if name in SCALARS:
            return CqlType(name, frozen=frozen)
        if name in ("list", "set"):
            (element,) = self._arity(self._args(), 1, name)
            return CqlType(name, (element,), frozen)
        if name == "map":
            return CqlType(name, tuple(self._arity(self._args(), 2, name)), frozen)
        if name == "tuple":
            # Tuples are always frozen; their elements are written as frozen values.
            return CqlType(name, tuple(self._args()), True)
        if name == "vector":
            self._expect("<")
            element = self.type_(frozen=True)
            self._expect(",")
            dim = self._next()
            self._expect(">")
            if not dim.isdigit():
                raise CqlTypeError(f"bad vector dimension {dim!r} in {self.text!r}")
            return CqlType(name, (element,), True, dimension=int(dim))
        return self._udt(token, name, frozen)

    def _arity(self, args: list[CqlType], n: int, name: str) -> list[CqlType]:
        if len(args) != n:
            raise CqlTypeError(f"{name} takes {n} type argument(s) in {self.text!r}")
        return args

    def _udt(self, token: str, name: str, frozen: bool) -> CqlType:
        udt_name = token[1:-1] if token.startswith('"') else name
        fields = self.udts.get(udt_name)
        if fields is None:
            raise CqlTypeError(f"unknown type {udt_name!r} in {self.text!r} "
                               f"(not a CQL type nor a UDT of keyspace {self.keyspace!r})")
        if udt_name in self.resolving:
            raise CqlTypeError(f"recursive UDT {udt_name!r}")
        self.resolving += (udt_name,)
        try:
            # Field types inside a UDT are always frozen values.
            params = tuple(parse_cql_type_frozen(t, self.keyspace, self.udts) for _, t in fields)
        finally:
            self.resolving = self.resolving[:-1]
        return CqlType("udt", params, frozen, keyspace=self.keyspace, udt_name=udt_name,
                       field_names=tuple(f for f, _ in fields))


def parse_cql_type_frozen(text: str, keyspace: str,
                          udts: Mapping[str, Sequence[tuple[str, str]]]) -> CqlType:
    """Parse `text` as the type of a nested value (always serialized frozen)."""
    parsed = parse_cql_type(text, keyspace, udts)
    return _freeze(parsed)


def _freeze(t: CqlType) -> CqlType:
    if t.frozen or not (t.is_collection or t.name == "udt"):
        return t
    return CqlType(t.name, t.params, True, t.dimension, t.keyspace, t.udt_name, t.field_names)


def _marshal(class_name: str, frozen: bool) -> CqlType:
    short = class_name.rsplit(".", 1)[-1]
    scalar = MARSHAL_CLASSES.get(short)
    if scalar is None:
        raise CqlTypeError(f"custom type {class_name!r} has no decoding rule")
    return CqlType(scalar, frozen=frozen)
