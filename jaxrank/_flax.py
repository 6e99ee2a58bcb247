"""flax.serialization for jaxrank's model dataclasses, without depending on flax.

``flax.serialization.to_bytes`` / ``to_state_dict`` only know types registered with it. A model
(and the kernel and info objects inside it) registers its class the first time one is made
while ``flax.serialization`` is imported; a class whose objects were made before flax was
imported is registered when ``flax.serialization`` is imported (an import hook on
``sys.meta_path`` that waits for that one module, then removes itself; before, such a model
serialised as an opaque leaf, issue 41 item 11). jaxrank never imports flax itself, so a
process without flax pays nothing. The state dict holds every non-static field by name.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import sys
import threading

_registered: set[type] = set()
_pending: set[type] = set()  # classes made before flax.serialization was imported
_lock = threading.Lock()


def register(obj) -> None:
    """Register ``type(obj)`` (a dataclass) with flax.serialization if flax is imported, or
    when it is imported later."""
    cls = type(obj)
    if cls in _registered:
        return
    ser = sys.modules.get("flax.serialization")
    if ser is not None and hasattr(ser, "register_serialization_state"):
        _register(ser, cls)
        return
    with _lock:
        _pending.add(cls)
        if not any(isinstance(f, _FlaxHook) for f in sys.meta_path):
            sys.meta_path.insert(0, _FlaxHook())


class _FlaxHook(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of ``flax.serialization`` so that the classes
    made before it was imported are registered once it has run."""

    def find_spec(self, name, path, target=None):
        if name != "flax.serialization":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, self)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, hook):
        self._loader, self._hook = loader, hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        with _lock:
            if self._hook in sys.meta_path:
                sys.meta_path.remove(self._hook)
            pending = sorted(_pending, key=lambda c: (c.__module__, c.__qualname__))
            _pending.clear()
        for cls in pending:
            if cls not in _registered:
                _register(module, cls)


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
