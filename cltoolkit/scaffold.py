"""Starting points: a new evaluation repository (`clt init`) and a complete, valid protocol draft for a suite
(`clt protocol new`)."""

from __future__ import annotations

import datetime
import json
from importlib import resources
from pathlib import Path
from typing import Any

from cltoolkit import __version__
from cltoolkit._io import atomic_write_text, dump_json
from cltoolkit.component_validation import validate_document
from cltoolkit.errors import InputError, Refusal
from cltoolkit.ids import parse_id
from cltoolkit.project import Project
from cltoolkit.protocol.load import loads_strict
from cltoolkit.registry import registries

__all__ = ["SCHEMA_REF", "init_project", "new_protocol", "template_suites"]

SCHEMA_REF = "../schemas/protocol.schema.json"
"""Where a protocol in `protocols/` finds the schema `clt init` writes (editors validate and complete with it)."""

README = """# {name}

An evaluation repository for clt (distribution `clt-prereg`, command `clt`, import package `cltoolkit`; the
package index's `cltoolkit` and `clt` are other projects): pre-registered protocols, frozen before any result, and
results only from the gatekeeper.

- `protocols/<name>-v<N>.json`: evaluation plans (`clt protocol new --suite <suite> <name>-v1` writes a draft)
- `registry/components.json`: this repository's own components (kind -> name -> "module:attr"; modules live here)
- `registry/locks/`: the freeze ledger (`clt protocol freeze`); never edited by hand
- `runs/`: run records of frozen protocols (sealed; commit them); `pilot-runs/` is git-ignored
- `reports/`: reports written by `clt report`
- `schemas/protocol.schema.json`: the protocol JSON Schema (editors use it through each protocol's `$schema`)

CI (`.github/workflows/clt.yml`) runs `clt protocol verify` and `clt report --check` for every reported protocol. It
installs clt from `CLT_SOURCE` (a repository variable: a wheel URL or `git+https://...@<commit>` of clt, what your
team installs; default `clt-prereg=={version}`). Commit each lock with its protocol: `clt protocol verify` checks
the history of every lock from that commit on.
"""

GITIGNORE = """pilot-runs/
runs/**/output*.json
runs/**/job.json
runs/.*.driver.lock
runs/**/.wmf-stages/
runs/**/.nav4-layouts-*.json
runs/**/.seals
runs/**/redo-intent.json
runs/**/checkpoint.pt
runs/**/checkpoint.mac
reports/**/.figures.json
__pycache__/
"""

CI = """name: clt
on: [push, pull_request]
jobs:
  evidence:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # verify reads the history of every lock
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      # clt itself (distribution clt-prereg; `cltoolkit` and `clt` on the package index are other projects):
      # set the repository variable CLT_SOURCE to the wheel or git URL your team installs clt from
      - run: pip install "${{CLT_SOURCE:-clt-prereg=={version}}}"
        env:
          CLT_SOURCE: ${{{{ vars.CLT_SOURCE }}}}
      - run: clt protocol verify
      - run: |
          for f in protocols/*.json; do
            id=$(basename "$f" .json)
            if grep -q '"protocolSha256"' "$f"; then clt report --protocol "$id" --check; fi
          done
"""


def template_suites() -> list[str]:
    """Suites with a packaged template."""
    folder = resources.files("cltoolkit").joinpath("templates")
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def _template(suite: str) -> dict[str, Any]:
    available = template_suites()
    if suite not in available:
        raise InputError(f"no template for suite {suite!r}. Available: {', '.join(available)}")
    text = resources.files("cltoolkit").joinpath("templates", f"{suite}.json").read_text(encoding="utf-8")
    return dict(loads_strict(text, f"template {suite}"))


def new_protocol(project: Project, suite: str, protocol_id: str, *, today: datetime.date | None = None) -> Path:
    """Write `protocols/<id>.json`: a complete draft for `suite` that validates as it is, with `$schema` for editors
    and a draft status; refuses to overwrite an existing file."""
    parse_id(protocol_id)
    path = project.protocol_path(protocol_id)
    if path.exists():
        raise Refusal(f"{path} already exists: edit it, or choose another id")
    draft: dict[str, Any] = {"$schema": SCHEMA_REF}
    for key, value in _template(suite).items():
        draft[key] = protocol_id if key == "id" else value
    day = (today or datetime.date.today()).isoformat()
    draft["status"] = {
        "stage": "draft",
        "updatedOn": day,
        "note": f"Draft from the {suite} template: replace the comparisons, budget, gates and seeds with your plan.",
    }
    draft["results"] = None
    validate_document(draft, str(path), registries(project.components_file), expected_id=protocol_id)
    atomic_write_text(path, dump_json(draft, sort_keys=False))
    return path


def init_project(folder: Path) -> list[Path]:
    """A new evaluation repository in `folder` (created if needed); refuses a folder that already holds one."""
    from cltoolkit.schemas import generate

    if (folder / "protocols").exists() or (folder / "registry").exists():
        raise Refusal(f"{folder} already holds an evaluation repository (protocols/ or registry/ exists)")
    written = []
    for rel, text in (
        ("README.md", README.format(name=folder.resolve().name, version=__version__)),
        (".gitignore", GITIGNORE),
        (".github/workflows/clt.yml", CI.format(version=__version__)),
        ("registry/components.json", json.dumps({"method": {}}, indent=2) + "\n"),
        ("schemas/protocol.schema.json", json.dumps(generate("protocol"), indent=2, sort_keys=True) + "\n"),
    ):
        atomic_write_text(folder / rel, text)
        written.append(folder / rel)
    for sub in ("protocols", "registry/locks", "runs", "reports"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / ".gitkeep").touch()
    if _git_init(folder):
        written.append(folder / ".git")
    return written


def _git_init(folder: Path) -> bool:
    """`git init` the new repository unless it lies inside one already or git is missing: `clt protocol verify`
    checks each lock's history in git, which an unversioned folder cannot show."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return False
    inside = subprocess.run([git, "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True)
    if inside.returncode == 0:
        return False
    return subprocess.run([git, "init", "-q"], cwd=folder, capture_output=True).returncode == 0  # else: no repository
