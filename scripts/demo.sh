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
cp "$here"/registry/locks/* "$work/registry/locks/"  # every file a lock names: splits, package stacks
rm -f "$work"/registry/locks/nav4-v1.*  # the scratch nav4-v1 is a draft: the demo cuts its budget for a quick pilot
cd "$work"
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("protocols/ladder-v1.json")
d = json.loads(p.read_text()); d["results"] = None
p.write_text(json.dumps(d, indent=2) + "\n")
n = pathlib.Path("protocols/nav4-v1.json")  # its lock is gone: a draft without results, as verify expects
d = json.loads(n.read_text()); d["results"] = None
d["status"] = {"stage": "draft", "updatedOn": d["status"]["updatedOn"], "note": "scratch draft for the demo pilot"}
n.write_text(json.dumps(d, indent=2) + "\n")
PY
echo "== clt protocol verify (every lock against its protocol; the scratch copy has no git: hashes only, said so)"; "$clt" protocol verify --without-git
echo "== clt run --protocol ladder-v1 (5 runs of a scalar linear system; seconds)"; "$clt" run --protocol ladder-v1
echo "== clt report --protocol ladder-v1 (the gatekeeper: results block, report.md and report.html; seconds)"
"$clt" report --protocol ladder-v1
echo; sed -n '/## Ladder/,/^Diagnostic/p' reports/ladder-v1/report.md
echo "== a changed frozen protocol is refused"
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("protocols/ladder-v1.json")
d = json.loads(p.read_text()); d["systems"]["true"]["a"] = 0.96
p.write_text(json.dumps(d, indent=2) + "\n")
PY
"$clt" protocol verify --without-git || echo "(verify failed as it should)"

if [ "${CLT_DEMO_PILOT:-1}" = 0 ]; then  # the demo's test stops here: the pilot trains for minutes
  echo "demo done (the nav4 pilot skipped: CLT_DEMO_PILOT=0)"
  exit 0
fi

echo "== a short nav4 PILOT (a draft copy with the budget cut to 4,096 interactions per task; pilots are never reported)"
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("protocols/nav4-v1.json")
d = json.loads(p.read_text())
d["budget"]["interactionsPerTask"] = 4096
for c in d["comparisons"]:
    c["hyperparameters"].update({"envs": 8, "rolloutSteps": 64, "epochs": 2})
d["evaluation"].update({"episodesPerTask": 20, "curvePoints": 2, "curveEpisodes": 10})
p.write_text(json.dumps(d, indent=2) + "\n")
PY
echo "   2 runs on 2 workers: each first generates the protocol's MiniGrid layouts from its seed ranges (training pool,"
echo "   distinct validation and test layouts; most of the first minute), then trains PPO on four tasks in turn and"
echo "   evaluates after each; a line per finished run. About 1-2 minutes on an idle machine, 4-5 on a loaded one."
"$clt" run --protocol nav4-v1 --pilot --stage pilot --seeds 100 --methods sequential,candidate --workers 2
"$clt" status --protocol nav4-v1 --pilot --stage pilot --scores
echo "demo done; the full reports are reports/ladder-v1/report.html and reports/sessions-v1/report.html in this repository"
