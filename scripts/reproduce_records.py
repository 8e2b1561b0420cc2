"""Rerun committed run records from their seeds and compare them with what is committed, field by field.

    python scripts/reproduce_records.py nav4-v1 candidate-o1-s0 sequential-o1-s0 ...
    python scripts/reproduce_records.py wmf-lite-v1 --group minigrid-min 0

Each run is executed in process through its suite (as a worker would) in a scratch store, with the committed
record's spec; the script prints one JSON line per run: equal fields, differing fields (with both values), and
the fields left out of the comparison with the reason (wall-clock times; wmf's stage keys, which hash the suite's
source files and so change with any code edit while the numbers do not). Exit 1 when any compared field differs.

A field that differs only in its last digits (within 4 units in the last place, `lastDigits`) is still a difference,
but usually the machine's, not the code's: BLAS libraries pick their kernels by CPU at run time, so a rerun on
another processor generation can round differently (sessions-v1's least-squares fits differ by 1-2 ulp on a
machine whose OpenBLAS picks other kernels than the one that wrote the records, both named "AMD EPYC"; with
`OPENBLAS_CORETYPE=SkylakeX` they are bit-identical there). Each line names the record's `hardware` and this machine's.

This is the proof that a refactor of the drivers changed no number (issue: a public method API): the records are
the ones in `runs/<id>/`, produced at the commit their provenance names.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cltoolkit.component_validation import load_protocol  # noqa: E402
from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.run.provenance import hardware_text  # noqa: E402
from cltoolkit.run.spec import RunSpec  # noqa: E402

NOT_COMPARED = {
    "trainingSeconds": "wall-clock time",
    "stages": "stage keys hash the suite's source files (they change with any code edit; the values do not)",
}


def _diff(path: str, old: Any, new: Any, out: list[str], added: list[str]) -> int:
    """Count compared leaves; append a line per differing leaf. A top-level field the committed record does not
    hold (or holds as null, "not measured") is listed in `added`: later code records more, never other values."""
    if isinstance(old, dict) and isinstance(new, dict):
        n = 0
        for key in sorted(set(old) | set(new)):
            if path == "metrics" and key in NOT_COMPARED:
                continue
            if path in ("metrics", "budget") and old.get(key) is None and new.get(key) is not None:
                added.append(f"{path}/{key}")
                continue
            n += _diff(f"{path}/{key}", old.get(key, "<missing>"), new.get(key, "<missing>"), out, added)
        return n
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return sum(_diff(f"{path}/{i}", a, b, out, added) for i, a, b in zip(range(len(old)), old, new, strict=True))
    if old != new or type(old) is not type(new):
        close = _last_digits(old, new)
        out.append(f"{path}: committed {old!r}, now {new!r}" + (" (last digits)" if close else ""))
    return 1


def _last_digits(old: Any, new: Any) -> bool:
    """Two floats within 4 units in the last place of the larger."""
    if not (isinstance(old, float) and isinstance(new, float) and math.isfinite(old) and math.isfinite(new)):
        return False
    return abs(old - new) <= 4 * math.ulp(max(abs(old), abs(new)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol")
    parser.add_argument("runs", nargs="*", help="run ids (folders of runs/<protocol>/)")
    parser.add_argument("--group", nargs=2, metavar=("CELL", "SEED"), help="every committed run of one (cell, seed)")
    args = parser.parse_args()
    regs = registries(ROOT / "registry" / "components.json")
    loaded = load_protocol(ROOT / "protocols" / f"{args.protocol}.json", regs).model
    suite = regs.new_suite(loaded.suite)
    store = ROOT / "runs" / args.protocol
    run_ids = list(args.runs)
    if args.group:
        cell, seed = args.group[0], int(args.group[1])
        for folder in sorted(store.iterdir()):
            rec = json.loads((folder / "record.json").read_text()) if (folder / "record.json").exists() else None
            if rec and rec["spec"]["cell"] == cell and rec["spec"]["seed"] == seed:
                run_ids.append(folder.name)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="clt-reproduce-") as scratch:
        for rid in run_ids:
            rec = json.loads((store / rid / "record.json").read_text())
            spec = RunSpec(
                protocol_id=args.protocol,
                protocol_sha256=rec["protocol"]["sha256"],
                pilot=False,
                **rec["spec"],
            )
            workdir = Path(scratch) / rid
            workdir.mkdir()
            out = suite.execute(loaded, spec, workdir)
            lines: list[str] = []
            added: list[str] = []
            compared = _diff("metrics", rec["metrics"], out.metrics, lines, added)
            committed_budget = {k: v for k, v in rec["budget"].items() if k in out.budget}
            compared += _diff("budget", committed_budget, out.budget, lines, added)
            failed += bool(lines)
            print(
                json.dumps(
                    {
                        "run": rid,
                        "committedAt": rec["provenance"].get("gitCommit"),
                        "fieldsCompared": compared,
                        "fieldsDiffering": len(lines),
                        "lastDigits": sum(line.endswith(" (last digits)") for line in lines),
                        "hardware": {"record": rec["provenance"].get("hardware"), "here": hardware_text()},
                        "differences": lines[:20],
                        "fieldsAdded": added,
                        "notCompared": {k: v for k, v in NOT_COMPARED.items() if k in rec["metrics"]},
                    }
                ),
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
