"""flax.serialization for jaxrank's model dataclasses, without depending on flax.

``flax.serialization.to_bytes`` / ``to_state_dict`` only know types registered with it. A model
(and the kernel and info objects inside it) registers its class the first time one is made
while ``flax.serialization`` is imported — jaxrank never imports flax itself, so a process
without flax pays nothing. The state dict holds every non-static field by name.
"""

from __future__ import annotations

import dataclasses
import sys

_registered: set[type] = set()


def register(obj) -> None:
    """Register ``type(obj)`` (a dataclass) with flax.serialization if flax is imported."""
    ser = sys.modules.get("flax.serialization")
    if ser is not None and type(obj) not in _registered:
        _register(ser, type(obj))


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("static")]


def _nested(ser, value) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value) not in _registered:
            _register(ser, type(value))


def _register(ser, cls: type) -> None:
    _registered.add(cls)
    names = _fields(cls)

    def to_state(x):
        out = {}
        for name in names:
            value = getattr(x, name)
            _nested(ser, value)
            out[name] = ser.to_state_dict(value)
        return out

    def from_state(x, state):
        new = {}
        for name in names:
            value = getattr(x, name)
            _nested(ser, value)
            new[name] = ser.from_state_dict(value, state[name], name=name)
        return dataclasses.replace(x, **new)

    ser.register_serialization_state(cls, to_state, from_state, override=True)
