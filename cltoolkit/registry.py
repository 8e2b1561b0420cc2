"""One typed registry class, `Registry[T]`, and the set of registries the toolkit uses.

Built-ins are data (`registry/components.json`: kind -> name -> "module:attr"), resolved lazily on first use,
so start-up imports nothing heavy. A project's own `registry/components.json` adds its components, and
third-party packages add theirs through the entry-point group `cltoolkit.plugins` (each entry point is a
callable that receives the `Registries` and registers into them).
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from cltoolkit.errors import InputError, UnknownNameError

if TYPE_CHECKING:
    from cltoolkit.components import Analysis, Method, Metric, Suite

__all__ = ["ENTRY_POINT_GROUP", "KINDS", "Registries", "Registry", "registries", "reset_registries"]

T = TypeVar("T")
ENTRY_POINT_GROUP = "cltoolkit.plugins"
KINDS = ("suite", "method", "metric", "analysis", "executor")
_BUILTIN_FILE = Path(__file__).resolve().parent.parent / "registry" / "components.json"


@dataclass
class _Entry:
    target: str | None
    origin: str
    value: Any = None
    resolved: bool = False
    search_path: str | None = None
    """A project's own components import from the project folder (and from nowhere else first)."""


def _on_module_path(folder: str | None) -> None:
    """`folder` on the module path from the first import of a project component on (the interpreter's working
    directory is not: workers start with `-P`). Appended after the installed packages, so a project module never
    shadows a dependency; kept, so the component's own later imports of its sibling modules work."""
    if folder is not None and folder not in sys.path:
        sys.path.append(folder)


class Registry(Generic[T]):
    """Names to components of one kind, with lazy "module:attr" placeholders and a base-class check."""

    def __init__(self, kind: str, base: type | None = None) -> None:
        self.kind = kind
        self.base = base
        self._entries: dict[str, _Entry] = {}

    @overload
    def register(self, name: str, target: None = None, *, origin: str = ...) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, target: str, *, origin: str = ...) -> None: ...

    def register(self, name: str, target: str | None = None, *, origin: str = "code") -> Callable[[T], T] | None:
        """`register(name, "module:attr")` adds a lazy entry; `@register(name)` registers the object below."""
        if not name or not isinstance(name, str):
            raise InputError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if target is not None and (target.count(":") != 1 or not all(target.split(":"))):
            raise InputError(f"{self.kind} {name!r}: target {target!r} is not 'module:attr'")
        if name in self._entries:
            known = self._entries[name]
            if target is not None and known.target == target:
                return None  # the same registration again (a project file copying the built-ins): not a conflict
            raise InputError(
                f"{self.kind} {name!r} is registered twice with different targets: {self.target(name)} "
                f"({known.origin}) and {target or 'an object registered in code'} ({origin})"
            )
        if target is not None:
            self._entries[name] = _Entry(target, origin)
            return None

        def decorator(obj: T) -> T:
            self._check_base(name, obj)
            self._entries[name] = _Entry(None, origin, obj, True)
            return obj

        return decorator

    def _check_base(self, name: str, obj: Any) -> None:
        if self.base is None:
            return
        if not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise InputError(
                f"{self.kind} {name!r} must be a subclass of {self.base.__module__}.{self.base.__qualname__}, "
                f"got {obj!r}"
            )

    def get(self, name: str) -> T:
        """The component called `name`, imported on first use; unknown names suggest close matches."""
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownNameError(self.unknown_message(name))
        if not entry.resolved:
            assert entry.target is not None  # a lazy entry always has its target
            module_name, attr = entry.target.split(":")
            try:
                _on_module_path(entry.search_path)
                obj: Any = importlib.import_module(module_name)
                for part in attr.split("."):
                    obj = getattr(obj, part)
            except ImportError as exc:
                where = f" (looked in {entry.search_path} and the installed packages)" if entry.search_path else ""
                raise InputError(
                    f"{self.kind} {name!r} ({entry.origin}): cannot import {module_name!r}{where}: {exc}"
                ) from None
            except AttributeError:
                raise InputError(
                    f"{self.kind} {name!r} ({entry.origin}): module {module_name!r} has no {attr!r}"
                ) from None
            self._check_base(name, obj)
            entry.value, entry.resolved = obj, True
        return cast(T, entry.value)

    def unknown_message(self, name: str, among: list[str] | None = None, where: str = "") -> str:
        """`name` is not registered: the close names and those available (`among` them only, e.g. one suite's
        methods, said as `where`)."""
        names = self.names() if among is None else among
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listed = ", ".join(names) if names else "none"
        return f"unknown {self.kind} {name!r}.{hint} Available{where}: {listed}"

    def names(self) -> list[str]:
        return sorted(self._entries)

    def target(self, name: str) -> str:
        entry = self._entries[name]
        if entry.target is not None:
            return entry.target
        return f"{getattr(entry.value, '__module__', '?')}:{getattr(entry.value, '__qualname__', '?')}"

    def origin(self, name: str) -> str:
        return self._entries[name].origin

    def set_search_path(self, name: str, folder: str) -> None:
        """Import `name`'s module from `folder` too (a project's own components live in the project folder)."""
        entry = self._entries[name]
        if entry.origin.startswith("project"):
            entry.search_path = folder

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Registries:
    """The registries of every kind."""

    by_kind: dict[str, Registry[Any]] = field(default_factory=dict)

    def __getitem__(self, kind: str) -> Registry[Any]:
        if kind not in self.by_kind:
            raise UnknownNameError(f"unknown kind {kind!r}. Available: {', '.join(self.by_kind)}")
        return self.by_kind[kind]

    @property
    def suite(self) -> Registry[type[Suite[Any]]]:
        return cast("Registry[type[Suite[Any]]]", self.by_kind["suite"])

    @property
    def method(self) -> Registry[type[Method]]:
        return cast("Registry[type[Method]]", self.by_kind["method"])

    @property
    def metric(self) -> Registry[type[Metric]]:
        return cast("Registry[type[Metric]]", self.by_kind["metric"])

    @property
    def analysis(self) -> Registry[type[Analysis[Any]]]:
        return cast("Registry[type[Analysis[Any]]]", self.by_kind["analysis"])

    def new_suite(self, name: str) -> Suite[Any]:
        """The suite `name`, made knowing these registries (its driver resolves methods here, in workers too)."""
        suite = self.suite.get(name)()
        suite.regs = self
        return suite

    def new_analysis(self, name: str) -> Analysis[Any]:
        """The analysis `name`, made knowing these registries."""
        analysis = self.analysis.get(name)()
        analysis.regs = self
        return analysis

    @property
    def executor(self) -> Registry[Any]:
        return self.by_kind["executor"]

    def load_file(self, path: Path, origin: str, search_path: str | None = None) -> None:
        """Register every entry of a components file (kind -> name -> "module:attr")."""
        from cltoolkit.protocol.load import load_json_file

        data = load_json_file(path)
        for kind, entries in data.items():
            if kind.startswith("$"):
                continue
            if kind not in self.by_kind or not isinstance(entries, dict):
                raise InputError(f"{path}: /{kind}: unknown kind, expected one of {', '.join(KINDS)}")
            for name, target in entries.items():
                if not isinstance(target, str):
                    raise InputError(f"{path}: /{kind}/{name}: expected a 'module:attr' string")
                self.by_kind[kind].register(name, target, origin=origin)
                if search_path is not None:
                    self.by_kind[kind].set_search_path(name, search_path)


def _bases() -> dict[str, type | None]:
    from cltoolkit import components

    return {
        "suite": components.Suite,
        "method": components.Method,
        "metric": components.Metric,
        "analysis": components.Analysis,
        "executor": components.Executor,
    }


_REGISTRIES: dict[Path | None, Registries] = {}


def registries(project_components: Path | None = None, *, plugins: bool = True) -> Registries:
    """The registries: built-ins, then a project's own components file where one is passed, then plugins (cached per
    project). Nothing is looked up from the working folder or CLT_ROOT: a caller that serves a project passes its
    `components_file` (the CLI does; a run's job carries it to the worker), and without one only the built-in and
    plugin components are known."""
    key = project_components.resolve() if project_components else None
    if key in _REGISTRIES:
        return _REGISTRIES[key]
    regs = Registries({kind: Registry(kind, base) for kind, base in _bases().items()})
    if _BUILTIN_FILE.is_file():
        regs.load_file(_BUILTIN_FILE, "builtin")
    else:  # installed from a wheel: the file ships inside the package
        from importlib import resources

        packaged = resources.files("cltoolkit").joinpath("_registry/components.json")
        regs.load_file(Path(str(packaged)), "builtin")
    if key is not None and key.is_file() and key != _BUILTIN_FILE:
        # the project folder (the one holding registry/): its own modules import from there, in workers too
        regs.load_file(key, f"project {key}", search_path=str(key.parent.parent))
    if plugins:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            hook = ep.load()
            hook(regs)
    _REGISTRIES[key] = regs
    return regs


def reset_registries() -> None:
    """Forget cached registries (after installing a plugin, or in tests)."""
    _REGISTRIES.clear()
