"""Test records shared by the Python suites: keys, values, headers and timestamps with the
awkward cases (null key, null value, binary bytes, repeated header keys)."""

from dataclasses import dataclass, field

BASE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)  # [(str, bytes)]
    timestamp_ms: int = BASE_TIMESTAMP_MS


def sample_records(count: int, compressible: bool = False):
    out = []
    for i in range(count):
        if i % 17 == 5:
            value = None
        elif compressible:
            value = f"{i}:".encode() + b"laminar compresses well " * 20
        elif i % 17 == 11:
            value = bytes((j + i) % 256 for j in range(4096 + i))
        else:
            value = f"value-{i}-".encode() + b"x" * (i % 50)
        # A null key, but never with a null value: kafka-python refuses records with neither.
        key = None if i % 10 == 3 and value is not None else f"key-{i:05}".encode()
        headers = [("index", str(i).encode())]
        if i % 4 == 0:
            headers.append(("index", bytes([0, 1, 2, 255])))
        out.append(Rec(key, value, headers, BASE_TIMESTAMP_MS + i * 1000))
    return out


def assert_matches(expected, got, first_offset=0):
    """`got` is a list of (offset, Rec). Names the first field that differs."""
    assert len(got) == len(expected), f"record count {len(got)} != {len(expected)}"
    for i, (want, (offset, rec)) in enumerate(zip(expected, got)):
        assert offset == first_offset + i, f"offset of record {i}: {offset}"
        assert rec.key == want.key, f"key of record {i}: {rec.key!r} != {want.key!r}"
        assert rec.value == want.value, f"value of record {i}"
        assert rec.headers == want.headers, f"headers of record {i}: {rec.headers!r}"
        assert rec.timestamp_ms == want.timestamp_ms, f"timestamp of record {i}: {rec.timestamp_ms}"
