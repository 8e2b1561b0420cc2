"""The report's drawn figures kept for the next `clt report` of the same inputs: a suite's own figures are drawn with
matplotlib (its import and the drawing, 0.4 CPU-seconds or more; the toolkit's own SVG charts cost milliseconds), and
a report is often rerun on unchanged records (after a status note, an erratum, or a check).

The figures are a function of the protocol document, the results block, the records and the code that draws them
(`render.figure_blocks`). The key is a SHA-256 over all four: the document without its results block and the status
fields a report writes (`REPORT_WRITES`; errata and code amendments stay in), the
results block about to be written without `measuredOn` (the report's clock, which `clt report --check` ignores too
and no figure draws), every record's run id and seal, the toolkit's source files, the project's
registered suites, analyses and metrics outside the toolkit (`provenance.component_digest`), the components file
and the versions of matplotlib and numpy. Any change in any of them draws the figures again.

The cache is a local speed-up, never evidence: one file per reported stage, `reports/<id>/<stage>/.figures.json`
(ignored by git), holding the key, the figures' HTML and a MAC under this machine's secret (`_io.local_mac`), so a
file committed, copied or planted from elsewhere is ignored. `clt report --check` never reads it: it draws every
figure again and compares the pages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from cltoolkit._io import NotRegularFile, atomic_write_text, local_mac, read_regular_bytes
from cltoolkit.project import Project
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries
from cltoolkit.run.record import RunRecord

__all__ = ["CACHE_FILE", "figures_key", "load_figures", "store_figures"]

CACHE_FILE = ".figures.json"

REPORT_WRITES = ("stage", "updatedOn", "note", "reportedStages")
"""The status fields `clt report` itself writes (no figure draws them): left out of the key, so that the report
after the first one finds the figures that one drew."""


def _code_key(project: Project, regs: Registries) -> bytes:
    """The code that draws: the toolkit's sources, the project's own figure-drawing components, the components
    file, and the plotting libraries' versions."""
    from importlib import metadata

    from cltoolkit.run.provenance import component_digest, toolkit_digest

    parts = [toolkit_digest()]
    for kind in ("suite", "analysis", "metric"):
        registry = regs[kind]
        for name in registry.names():
            target = registry.target(name)
            if not target.startswith("cltoolkit."):
                parts.append(f"{kind}:{name}={target}={component_digest(target)}")
    try:
        parts.append(hashlib.sha256(read_regular_bytes(project.components_file)).hexdigest())
    except (OSError, NotRegularFile):
        parts.append("no components file")
    for dist in ("matplotlib", "numpy"):
        try:
            parts.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} absent")
    return "\n".join(parts).encode()


def figures_key(
    project: Project, loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord], regs: Registries
) -> str:
    """`sha256:<hex>` of everything the figures are drawn from (see the module's docstring)."""
    digest = hashlib.sha256()
    document = {k: v for k, v in loaded.document.items() if k not in ("results", "status")}
    status = loaded.document.get("status")
    kept = {k: v for k, v in status.items() if k not in REPORT_WRITES} if isinstance(status, dict) else {}
    document["status"] = kept  # absent and empty alike: a first report adds only the fields it writes
    digest.update(json.dumps(document, sort_keys=True, default=str).encode())
    digest.update(b"\0results\0" + results.model_dump_json(exclude={"measuredOn"}).encode())
    digest.update(b"\0records\0")
    for record in records:
        digest.update(f"{record.runId} {record.seal or record.model_dump_json()}\n".encode())
    digest.update(b"\0code\0" + _code_key(project, regs))
    return "sha256:" + digest.hexdigest()


def _mac(key: str, blocks_text: str) -> str | None:
    return local_mac(f"{key}\0{hashlib.sha256(blocks_text.encode()).hexdigest()}".encode())


def load_figures(folder: Path, key: str) -> dict[str, str] | None:
    """The figures kept under `key` in `folder`, or None: no file, another key, or a MAC this machine did not make
    (the file came from elsewhere, or was edited)."""
    try:
        data = json.loads(read_regular_bytes(folder / CACHE_FILE))
        blocks_text = data["blocks"]
        if data["key"] != key or not isinstance(blocks_text, str):
            return None
        mac = _mac(key, blocks_text)
        if mac is None or data["mac"] != mac:
            return None
        blocks = json.loads(blocks_text)
    except (OSError, NotRegularFile, ValueError, KeyError, TypeError):
        return None
    if not isinstance(blocks, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in blocks.items()):
        return None
    return blocks


def store_figures(folder: Path, key: str, blocks: dict[str, str]) -> None:
    """Keep the figures under `key` (best effort: a machine without a local secret, or a folder that cannot be
    written, just draws them again next time)."""
    blocks_text = json.dumps(blocks, sort_keys=True)
    mac = _mac(key, blocks_text)
    if mac is None:
        return
    try:
        atomic_write_text(folder / CACHE_FILE, json.dumps({"key": key, "mac": mac, "blocks": blocks_text}))
    except OSError:
        pass
