"""The protobuf wire format, just enough to write a SentencePiece model and an ONNX graph.

Both are protobuf messages; writing the few fields we need by hand spares the `onnx` and
`protobuf` Python packages (and their schema versions) at run time.
"""

from __future__ import annotations

import struct

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    """Base-128 varint; negative int64 values take their 64-bit two's complement."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def int_field(number: int, value: int) -> bytes:
    return key(number, VARINT) + varint(value)


def float_field(number: int, value: float) -> bytes:
    return key(number, FIXED32) + struct.pack("<f", value)


def bytes_field(number: int, payload: bytes | bytearray | memoryview) -> bytes:
    return key(number, BYTES) + varint(len(payload)) + bytes(payload)


def str_field(number: int, text: str) -> bytes:
    return bytes_field(number, text.encode("utf-8"))
