"""The project folder: the one that holds `protocols/` and `registry/`.

Found from the current directory upward (like git), or given by `--root` / `CLT_ROOT`, so a user's own
evaluation repository works the same way as this one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cltoolkit.errors import InputError
from cltoolkit.ids import parse_id

__all__ = ["Project", "find_project"]


@dataclass(frozen=True)
class Project:
    """Paths of one project folder."""

    root: Path

    @property
    def protocols_dir(self) -> Path:
        return self.root / "protocols"

    @property
    def locks_dir(self) -> Path:
        return self.root / "registry" / "locks"

    @property
    def components_file(self) -> Path:
        return self.root / "registry" / "components.json"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def pilot_runs_dir(self) -> Path:
        return self.root / "pilot-runs"

    def pilot_store_base(self, key: str) -> Path:
        """The folder of the pilot stores of one protocol content (`key`: its hash's first 16 hex digits)."""
        return self.pilot_runs_dir / key.removeprefix("sha256:")[:16]

    def store_base(self, digest: str, *, pilot: bool) -> Path:
        """Where the runs of a protocol of content `digest` live: `runs/`, or a pilot's `pilot-runs/<hash16>/`."""
        return self.pilot_store_base(digest) if pilot else self.runs_dir

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    def writable(self, path: Path) -> Path:
        """`path`, refused when it (or a folder on the way, through a symbolic link) leads outside the project
        folder: a clone can carry links, and clt writes only inside the project."""
        from cltoolkit.errors import Refusal

        root = self.root.resolve()
        real = path.resolve()
        if real != root and root not in real.parents:
            plain = path.absolute()
            if plain != root and root not in plain.parents:
                raise Refusal(
                    f"{path} lies outside the project folder {root}: clt writes only inside the project (copy the "
                    f"file into {self.protocols_dir} to report it there)"
                )
            raise Refusal(
                f"{path} leads outside the project folder (to {real}, through a symbolic link): clt writes only "
                f"inside {root}; replace the link with a folder"
            )
        return path

    def stage_reports_dir(self, protocol_id: str, stage: str) -> Path:
        """One reported stage's report and results block, kept when a later stage is reported."""
        return self.reports_dir / protocol_id / stage

    def protocol_path(self, protocol_id: str) -> Path:
        parse_id(protocol_id)
        return self.protocols_dir / f"{protocol_id}.json"

    def lock_path(self, protocol_id: str) -> Path:
        return self.locks_dir / f"{protocol_id}.lock.json"

    def protocol_ids(self) -> list[str]:
        if not self.protocols_dir.is_dir():
            return []
        return sorted(p.stem for p in self.protocols_dir.glob("*.json"))

    def resolve_protocol(self, ref: str) -> Path:
        """A protocol id (`nav4-v1`) or a path to a protocol file."""
        candidate = Path(ref)
        if ref.endswith(".json") or os.sep in ref:
            if not candidate.is_file():
                raise InputError(f"{ref}: no such protocol file")
            return candidate
        path = self.protocol_path(ref)
        if not path.is_file():
            known = self.protocol_ids()
            name = parse_id(ref).name
            same = [p for p in known if p.rsplit("-v", 1)[0] == name]
            others = [p for p in known if p not in same]
            hint = f" Versions of {name} that exist: {', '.join(same)}." if same else ""
            listed = f" Other protocols: {', '.join(others)}." if others else ("" if same else " There are none yet.")
            raise InputError(f"protocol {ref!r} not found in {self.protocols_dir}.{hint}{listed}")
        return path


def find_project(root: str | os.PathLike[str] | None = None, start: Path | None = None) -> Project:
    """The project given by `root`, else `CLT_ROOT`, else the nearest folder upward holding `protocols/`."""
    given = root if root is not None else os.environ.get("CLT_ROOT")
    if given:
        path = Path(given).resolve()
        if not path.is_dir():
            raise InputError(f"project root {given} is not a folder")
        return Project(path)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "protocols").is_dir() or (folder / "registry").is_dir():
            return Project(folder)
    raise InputError(
        f"no clt project found from {here} upward (a folder holding protocols/ or registry/); "
        "run inside one, or pass --root / set CLT_ROOT"
    )
