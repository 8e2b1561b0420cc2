"""The freeze pins the evaluator: the lock records the source digest of every component a protocol uses, an
official run of other code is refused by name, a dated code amendment lets it run and every report prints it
first; locks made before pinning keep working and say "not pinned"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.protocol.lock import read_lock
from cltoolkit.registry import reset_registries
from cltoolkit.run.runner import run_protocol
from tests.conftest import git, read, write
from tests.toy_suite import COMPONENTS, toy_protocol

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

METHOD = '''
from tests.toy_suite import ToyMethod


class Mine(ToyMethod):
    """A user's method, in the project folder."""

    shift = 0.0
'''


@pytest.fixture
def mine(toy: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The toy project with its candidate a method defined in the project folder (`mymethods.py`), frozen."""
    (toy.root / "mymethods.py").write_text(METHOD)
    monkeypatch.syspath_prepend(str(toy.root))
    monkeypatch.delitem(sys.modules, "mymethods", raising=False)  # another test's project folder had one too
    monkeypatch.setenv("PYTHONPATH", f"{toy.root}:{Path(__file__).resolve().parents[2]}")
    write(toy.components_file, {**COMPONENTS, "method": {**COMPONENTS["method"], "me.mine": "mymethods:Mine"}})
    doc = toy_protocol(seeds=3)
    doc["comparisons"][0]["method"] = "me.mine"
    write(toy.protocol_path("toy-v1"), doc)
    reset_registries()
    freeze(toy, "toy-v1")
    return toy


def _edit_method(project: Project) -> None:
    (project.root / "mymethods.py").write_text(METHOD.replace("shift = 0.0", "shift = 0.05  # tuned after freezing"))
    from cltoolkit.run import provenance

    provenance._source_digest.cache_clear()


def test_the_lock_pins_every_component_the_protocol_uses(mine: Project) -> None:
    lock = read_lock(mine, "toy-v1")
    assert lock is not None
    assert lock.components is not None
    assert set(lock.components) == {
        "suite:toy",
        "method:me.mine",
        "method:toy.method",
        "metric:toy.score-v1",
        "analysis:toy",
        "evaluator:gatekeeper",
        "evaluator:stats",
    }
    assert lock.components["method:me.mine"].target == "mymethods:Mine"
    assert read(mine.lock_path("toy-v1"))["components"]["method:me.mine"]["sourceSha256"].startswith("sha256:")


def test_an_edited_method_is_refused_then_runs_under_a_code_amendment_printed_first(mine: Project, cli) -> None:
    _edit_method(mine)
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert "method:me.mine (mymethods:Mine): its code is sha256:" in out.output
    assert "the lock pinned sha256:" in out.output
    assert "clt protocol amend-code toy-v1" in out.output
    assert "bump" in out.output
    assert not (mine.runs_dir / "toy-v1").exists() or not list((mine.runs_dir / "toy-v1").glob("*/record.json"))

    out = cli("protocol", "amend-code", "toy-v1", "--component", "method:me.mine", "--reason", "")
    assert out.exit_code != 0
    assert "--reason is empty" in out.output
    out = cli("protocol", "amend-code", "toy-v1", "--component", "method:nope", "--reason", "x")
    assert out.exit_code != 0
    assert "the lock pins" in out.output
    out = cli("protocol", "amend-code", "toy-v1", "--component", "method:me.mine", "--reason", "shift tuned: +0.05")
    assert out.exit_code == 0, out.output
    assert cli("protocol", "verify").exit_code == 0  # the amendment is outside the hash
    out = cli("protocol", "amend-code", "toy-v1", "--component", "method:me.mine", "--reason", "again")
    assert out.exit_code != 0
    assert "already accepted" in out.output

    assert cli("run", "-p", "toy-v1").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0
    results = read(mine.protocol_path("toy-v1"))["results"]
    assert results["componentCode"]["method:me.mine"] == "amended"
    assert results["componentCode"]["suite:toy"] == "as frozen"
    md = (mine.reports_dir / "toy-v1" / "report.md").read_text()
    top = md.split("## ", 1)[0]
    assert "Code amendments: 1 change(s) of the pinned evaluator" in top
    assert "shift tuned: +0.05" in top
    assert "`method:me.mine` amended" in md


def test_the_refusal_names_the_commit_that_wrote_the_lock_as_the_checkout_of_the_frozen_code(
    mine: Project, cli
) -> None:
    git(mine.root, "init", "-q")
    git(mine.root, "add", "-A")
    git(mine.root, "commit", "-qm", "frozen")
    frozen = git(mine.root, "rev-parse", "--short", "HEAD").strip()
    _edit_method(mine)
    git(mine.root, "commit", "-qam", "tuned after freezing")
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert f"run from a checkout of {frozen}, the commit that wrote the lock" in out.output, out.output
    assert f"git worktree add ../toy-v1-frozen {frozen}" in out.output


def test_records_of_unpinned_code_are_refused_by_the_gatekeeper(mine: Project, cli) -> None:
    run_protocol(mine, "toy-v1")
    _edit_method(mine)
    lock = read(mine.lock_path("toy-v1"))
    # records made by code the lock does not pin (as if the lock had pinned other code): refused by name
    lock["components"]["method:me.mine"]["sourceSha256"] = "sha256:" + "1" * 64
    mine.lock_path("toy-v1").write_text(json.dumps(lock))
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1 and "differs from the code pinned at freezing" in out.output, out.output
    assert "method:me.mine: runs cand-s0, cand-s1, cand-s2 carry code sha256:" in out.output


def test_a_lock_without_pins_keeps_working_and_its_report_says_not_pinned(mine: Project, cli) -> None:
    lock = read(mine.lock_path("toy-v1"))
    del lock["components"]
    mine.lock_path("toy-v1").write_text(json.dumps(lock))
    _edit_method(mine)
    assert cli("run", "-p", "toy-v1").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert read(mine.protocol_path("toy-v1"))["results"]["componentCode"] == {}
    assert "Evaluator code: not pinned" in (mine.reports_dir / "toy-v1" / "report.md").read_text()


@pytest.mark.committed
def test_every_committed_report_of_an_unpinned_lock_says_so() -> None:
    from tests.conftest import REPO

    for lock_file in sorted((REPO / "registry" / "locks").glob("*.lock.json")):
        pid = lock_file.name.removesuffix(".lock.json")
        report = REPO / "reports" / pid / "report.md"
        if "components" not in read(lock_file) and report.is_file():
            assert "Evaluator code: not pinned" in report.read_text(), pid


ANALYSIS = '''
from tests.toy_suite import ToyAnalysis


class MyAnalysis(ToyAnalysis):
    """A user's analysis, in the project folder."""
'''


def test_an_analysis_edited_after_the_runs_is_refused_at_report_time_then_amended(
    toy: Project, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis computes the results when `clt report` runs: records made by the frozen code are not enough
    when the code computing the report is not the frozen one."""
    mine = toy
    (mine.root / "myanalysis.py").write_text(ANALYSIS)
    monkeypatch.syspath_prepend(str(mine.root))
    monkeypatch.delitem(sys.modules, "myanalysis", raising=False)
    monkeypatch.setenv("PYTHONPATH", f"{mine.root}:{Path(__file__).resolve().parents[2]}")
    write(mine.components_file, {**COMPONENTS, "analysis": {"toy": "myanalysis:MyAnalysis"}})
    write(mine.protocol_path("toy-v1"), toy_protocol(seeds=3))
    reset_registries()
    freeze(mine, "toy-v1")
    lock = read(mine.lock_path("toy-v1"))
    assert lock["components"]["analysis:toy"]["target"] == "myanalysis:MyAnalysis"
    assert cli("run", "-p", "toy-v1").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0  # the frozen analysis: reported
    assert read(mine.protocol_path("toy-v1"))["results"]["componentCode"]["analysis:toy"] == "as frozen"

    (mine.root / "myanalysis.py").write_text(ANALYSIS + "\n# a new report section, after the runs\n")
    from cltoolkit.run import provenance

    provenance._source_digest.cache_clear()
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert "analysis:toy: the code computing this report is sha256:" in out.output
    assert "no amendment covers it" in out.output

    reason = "a report section added after the runs"
    out = cli("protocol", "amend-code", "toy-v1", "--component", "analysis:toy", "--reason", reason)
    assert out.exit_code == 0, out.output
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert read(mine.protocol_path("toy-v1"))["results"]["componentCode"]["analysis:toy"] == "amended"
    top = (mine.reports_dir / "toy-v1" / "report.md").read_text().split("## ", 1)[0]
    assert reason in top


def test_amend_code_digests_the_project_module_a_run_loads_never_zero(toy: Project, monkeypatch) -> None:
    """In a fresh process the project folder is not on the module path until the component is resolved: the digest
    `amend-code` records is the one `clt run` computes (it used to be `sha256:000...`)."""
    from cltoolkit.freeze_actions import amend_code
    from cltoolkit.registry import registries
    from cltoolkit.run import provenance

    (toy.root / "projmethods.py").write_text(METHOD)
    write(toy.components_file, {**COMPONENTS, "method": {**COMPONENTS["method"], "me.proj": "projmethods:Mine"}})
    doc = toy_protocol(seeds=2)
    doc["comparisons"][0]["method"] = "me.proj"
    write(toy.protocol_path("toy-v1"), doc)
    reset_registries()
    freeze(toy, "toy-v1")
    (toy.root / "projmethods.py").write_text(METHOD.replace("shift = 0.0", "shift = 0.05"))
    provenance._source_digest.cache_clear()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(toy.root)])  # as a fresh `clt` process
    monkeypatch.delitem(sys.modules, "projmethods", raising=False)
    reset_registries()
    _, amendment = amend_code(toy, "toy-v1", "method:me.proj", "shift tuned")
    assert amendment.sourceSha256 != provenance.NO_SOURCE
    run_digest = provenance.component_digest(registries(toy.components_file).method.target("me.proj"))
    assert amendment.sourceSha256 == run_digest


def test_a_changed_gate_decision_rule_is_refused_then_reported_under_an_amendment_printed_first(
    mine: Project, cli, monkeypatch
) -> None:
    """The lock pins the gatekeeper and the statistics (#52): a report computed by other gatekeeper code is refused
    by name until a dated amendment accepts it, and every report then prints the amendment first."""
    from cltoolkit.run import provenance

    lock = read_lock(mine, "toy-v1")
    assert lock is not None and lock.components is not None
    assert lock.components["evaluator:gatekeeper"].target.startswith("cltoolkit.gatekeeper.")
    assert lock.components["evaluator:stats"].target.startswith("cltoolkit.stats.")
    assert cli("run", "-p", "toy-v1").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0
    real = provenance._source_digest

    def edited(path: str, single: bool, data: bool = False) -> str:  # the gatekeeper as if a decision rule changed
        return "sha256:" + "1" * 64 if Path(path).name == "gatekeeper" else real(path, single, data)

    monkeypatch.setattr(provenance, "_source_digest", edited)
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert "evaluator:gatekeeper: the code computing this report is sha256:1111" in out.output
    check = cli("report", "-p", "toy-v1", "--check")
    assert check.exit_code == 1 and "evaluator:gatekeeper" in check.output
    out = cli(
        "protocol", "amend-code", "toy-v1", "--component", "evaluator:gatekeeper", "--reason", "Holm made step-down"
    )
    assert out.exit_code == 0, out.output
    assert cli("report", "-p", "toy-v1").exit_code == 0
    results = read(mine.protocol_path("toy-v1"))["results"]
    assert results["componentCode"]["evaluator:gatekeeper"] == "amended"
    assert results["componentCode"]["evaluator:stats"] == "as frozen"
    top = (mine.reports_dir / "toy-v1" / "report.md").read_text().split("## ", 1)[0]
    assert "Code amendments: 1 change(s) of the pinned evaluator" in top
    assert "`evaluator:gatekeeper` now `sha256:111111111111...`: Holm made step-down" in top


def test_a_project_methods_helper_module_is_pinned_with_it(toy: Project, cli, monkeypatch) -> None:
    """#52: the code a project method loads from the project (a helper module it imports) is pinned with it: an
    edit of the helper after freezing is refused as an edit of the method."""
    from cltoolkit.run import provenance

    (toy.root / "helper_consts.py").write_text("SHIFT = 0.0\n")
    helped = METHOD.replace("shift = 0.0", "shift = SHIFT")
    helped = helped.replace("from tests.toy_suite", "from helper_consts import SHIFT\nfrom tests.toy_suite")
    (toy.root / "helpedmethods.py").write_text(helped)
    monkeypatch.syspath_prepend(str(toy.root))
    for name in ("helper_consts", "helpedmethods"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv("PYTHONPATH", f"{toy.root}:{Path(__file__).resolve().parents[2]}")
    write(toy.components_file, {**COMPONENTS, "method": {**COMPONENTS["method"], "me.helped": "helpedmethods:Mine"}})
    doc = toy_protocol(seeds=2)
    doc["comparisons"][0]["method"] = "me.helped"
    write(toy.protocol_path("toy-v1"), doc)
    reset_registries()
    freeze(toy, "toy-v1")
    (toy.root / "helper_consts.py").write_text("SHIFT = 0.05  # tuned after freezing\n")
    provenance._source_digest.cache_clear()
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 1 and "method:me.helped (helpedmethods:Mine): its code is sha256:" in out.output


@pytest.mark.e2e
def test_after_amend_code_a_redo_of_the_amended_method_is_accepted(mine: Project, cli) -> None:
    """#51: the documented way out after fixing a frozen project method: `amend-code` records the digest `clt run`
    computes, and a `--redo` of a completed run under the fixed code is accepted, its record carrying that digest."""
    assert cli("run", "-p", "toy-v1").exit_code == 0
    _edit_method(mine)
    assert cli("run", "-p", "toy-v1", "--redo", "cand-s0", "--reason", "fixed").exit_code == 1  # refused: unpinned
    out = cli("protocol", "amend-code", "toy-v1", "--component", "method:me.mine", "--reason", "fixed a sign")
    assert out.exit_code == 0, out.output
    amended = read(mine.protocol_path("toy-v1"))["status"]["codeAmendments"][-1]["sourceSha256"]
    out = cli("run", "-p", "toy-v1", "--redo", "cand-s0", "--reason", "rerun under the fixed code")
    assert out.exit_code == 0, out.output
    assert cli("report", "-p", "toy-v1").exit_code == 1  # one comparison of two codes: refused until all are redone
    out = cli("run", "-p", "toy-v1", "--redo", "cand-s1,cand-s2", "--reason", "rerun under the fixed code")
    assert out.exit_code == 0, out.output
    record = read(mine.runs_dir / "toy-v1" / "cand-s0" / "record.json")
    assert record["provenance"]["components"]["method:me.mine"]["sourceSha256"] == amended
    assert record["replaces"][-1]["reason"] == "rerun under the fixed code"
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 0, out.output
