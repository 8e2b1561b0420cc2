#!/usr/bin/env bash
# `make demo`: the main job on a real protocol. The ladder runs and reports in a scratch copy of this project
# (so the committed results stay as they are), then the freeze ledger is shown refusing a changed protocol.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
clt="$here/.venv/bin/clt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/registry/locks"
cp -r "$here/protocols" "$work/"
cp "$here"/registry/locks/*.json "$work/registry/locks/"
cd "$work"
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("protocols/ladder-v1.json")
d = json.loads(p.read_text()); d["results"] = None
p.write_text(json.dumps(d, indent=2) + "\n")
PY
echo "== clt protocol verify"; "$clt" protocol verify
echo "== clt run --protocol ladder-v1"; "$clt" run --protocol ladder-v1
echo "== clt report --protocol ladder-v1"; "$clt" report --protocol ladder-v1
echo; sed -n '/## Ladder/,/^Diagnostic/p' reports/ladder-v1/report.md
echo "== a changed frozen protocol is refused"
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("protocols/ladder-v1.json")
d = json.loads(p.read_text()); d["systems"]["true"]["a"] = 0.96
p.write_text(json.dumps(d, indent=2) + "\n")
PY
"$clt" protocol verify || echo "(verify failed as it should)"
echo "demo done; the full report is reports/ladder-v1/report.html in this repository"
