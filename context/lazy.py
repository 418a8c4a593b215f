"""Lazy package exports (PEP 562): a package's submodule is imported when a name is first used.

So ``import graphs.cli`` does not load LangGraph's graph runtime, the chat-model classes or the
bench for a command that needs none of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports an exported name's module on first access.

    Args:
        package: The package's name (``__name__``).
        names: Exported name -> the module it lives in (relative, e.g. ``".runner"``).

    Returns:
        The ``__getattr__``: the first access imports the module, keeps the value in the
        package's namespace and returns it; an unknown name raises ``AttributeError`` (as a
        missing attribute does, so ``from package import submodule`` still imports it).
    """

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
