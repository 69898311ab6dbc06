"""Canonical protobuf bytes of a message: the encoding the conversion contract is written in.

Canonical here means fields in number order and map entries sorted by key, bytewise, each with
its key and its value: what Go writes with ``proto.MarshalOptions{Deterministic: true}`` and
what ``tests/conformance/expected`` holds. Python's ``SerializeToString(deterministic=True)``
(the upb backend) writes the same except for string map keys of which one is a prefix of
another, such as the labels ``app`` and ``app.kubernetes.io/name``: it puts the longer one first
(its map sorter compares string keys in reverse, protocolbuffers/protobuf#26621). Both forms
decode to the same message, and the service derives snapshot ids from decoded messages, so this
matters only to a caller comparing bytes across languages.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["serialize"]


def serialize(message: Message) -> bytes:
    """The canonical bytes of ``message`` (see the module documentation)."""
    return _canonical(message.DESCRIPTOR, message.SerializeToString(deterministic=True))


def _varint(b: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _fields(b: bytes):
    """(number, wire type, payload, the field's whole bytes) of each field of an encoded message."""
    i = 0
    while i < len(b):
        start = i
        key, i = _varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(b, i)
            payload = b[start:i]
        elif wire == 1:
            i += 8
            payload = b[start:i]
        elif wire == 2:
            length, i = _varint(b, i)
            payload = b[i : i + length]
            i += length
        elif wire == 5:
            i += 4
            payload = b[start:i]
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, payload, b[start:i]


def _length_delimited(number: int, payload: bytes) -> bytes:
    out = bytearray()
    _put_varint(out, (number << 3) | 2)
    _put_varint(out, len(payload))
    out += payload
    return bytes(out)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def _sort_key(entry: Descriptor, payload: bytes):
    key_fd = entry.fields_by_number[1]
    for number, _, value, _ in _fields(payload):
        if number == 1:
            if key_fd.type == FieldDescriptor.TYPE_STRING:
                return (0, value)
            return (0, _varint(value, 0)[0])
    return (0, b"" if key_fd.type == FieldDescriptor.TYPE_STRING else 0)


def _canonical(desc: Descriptor, b: bytes) -> bytes:
    parts: list = []  # bytes, or the number of a map field whose sorted entries go there
    entries: dict[int, list] = {}
    for number, wire, payload, whole in _fields(b):
        fd = desc.fields_by_number.get(number)
        if fd is None or wire != 2 or fd.type != FieldDescriptor.TYPE_MESSAGE:
            parts.append(whole)
        elif _is_map(fd):
            entry = fd.message_type
            value_fd = entry.fields_by_number[2]
            if value_fd.type == FieldDescriptor.TYPE_MESSAGE:
                rebuilt = bytearray()
                for n, w, p, wh in _fields(payload):
                    rebuilt += _length_delimited(n, _canonical(value_fd.message_type, p)) if n == 2 else wh
                payload = bytes(rebuilt)
            if number not in entries:
                entries[number] = []
                parts.append(number)
            entries[number].append((_sort_key(entry, payload), _length_delimited(number, payload)))
        else:
            parts.append(_length_delimited(number, _canonical(fd.message_type, payload)))
    out = bytearray()
    for part in parts:
        if isinstance(part, int):
            for _, encoded in sorted(entries[part], key=lambda e: e[0]):
                out += encoded
        else:
            out += part
    return bytes(out)
