"""A small name -> object registry, after timm's model registry.

One decorator registers a function or class under its own name, with free-form tags
(``family="blur"``); lookups of unknown names raise with the list of known ones.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class RegistryClash(ValueError):
    """A name registered twice: by the package and a plugin, or by two plugins."""


def origin(obj: object) -> str:
    """The module that defines a registered object (a function's, a class's, an
    analysis's ``module``)."""
    return str(getattr(obj, "module", None) or getattr(obj, "__module__", None) or "?")


def describe_origin(module: str) -> str:
    """``built-in (vqarobust.x)`` for the package's own modules, else ``module m``."""
    return f"built-in ({module})" if module.split(".")[0] == "vqarobust" else f"module {module}"


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered object with its tags."""

    name: str
    obj: T
    tags: dict[str, Any] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        """The module that registered it (:func:`origin`)."""
        return origin(self.obj)


class Registry(Generic[T]):
    """Maps names to registered objects; a duplicate name is an error."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str | None = None, **tags: Any) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (default: its ``__name__``)."""

        def decorate(obj: T) -> T:
            key = name or getattr(obj, "__name__", None)
            if not key:
                raise TypeError(f"cannot infer a {self.kind} name for {obj!r}")
            if key in self._entries:
                raise RegistryClash(
                    f"{self.kind} {key!r} of {describe_origin(origin(obj))} clashes with the "
                    f"one of {describe_origin(self._entries[key].origin)}"
                )
            self._entries[key] = Entry(key, obj, dict(tags))
            return obj

        return decorate

    def list(self, filter: str = "*", **tags: Any) -> list[str]:
        """Registered names matching a glob ``filter`` and all given tag values, sorted."""
        return sorted(
            e.name
            for e in self._entries.values()
            if fnmatch.fnmatch(e.name, filter) and all(e.tags.get(k) == v for k, v in tags.items())
        )

    def entry(self, name: str) -> Entry[T]:
        """The entry registered under ``name``; unknown names raise ``KeyError``."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise KeyError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def get(self, name: str) -> T:
        """The object registered under ``name``."""
        return self.entry(name).obj

    def create(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call the registered object with the given arguments."""
        return self.get(name)(*args, **kwargs)  # type: ignore[operator]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def view(self, kind: str, **tags: Any) -> RegistryView[T]:
        """The part of this registry whose entries carry ``tags``; registering through the
        view adds them. Names stay unique across the whole registry."""
        return RegistryView(self, kind, tags)


class RegistryView(Registry[T]):
    """A tag-filtered window on a :class:`Registry` (e.g. the image perturbations)."""

    def __init__(self, parent: Registry[T], kind: str, tags: dict[str, Any]) -> None:
        self.kind = kind
        self.parent = parent
        self.tags = dict(tags)

    @property
    def _entries(self) -> dict[str, Entry[T]]:  # type: ignore[override]
        return {name: e for name, e in self.parent._entries.items() if self._holds(e)}

    def _holds(self, entry: Entry[T]) -> bool:
        """Whether ``entry`` carries this view's tags."""
        return all(entry.tags.get(k) == v for k, v in self.tags.items())

    def entry(self, name: str) -> Entry[T]:
        """The entry registered under ``name`` with this view's tags; others raise
        ``KeyError`` naming this view's entries."""
        # Straight to the parent's dict: a plan asks thousands of times.
        found = self.parent._entries.get(name)
        if found is not None and self._holds(found):
            return found
        return super().entry(name)  # raises, naming this view's entries

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered with this view's tags."""
        found = self.parent._entries.get(name)  # type: ignore[call-overload]
        return found is not None and self._holds(found)

    def register(self, name: str | None = None, **tags: Any) -> Callable[[T], T]:
        """Register in the parent registry with this view's tags added."""
        return self.parent.register(name, **{**tags, **self.tags})
