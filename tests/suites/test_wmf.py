"""wmf suite: models, metrics and the stage cache (fast, tiny sizes); one end-to-end MiniGrid run pair for
determinism and stage reuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("minigrid")

from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.suites.wmf import evaluate as ev  # noqa: E402
from cltoolkit.suites.wmf.method_models import UGMTM, ProgressiveRSSM, fisher_diagonal  # noqa: E402
from cltoolkit.suites.wmf.models import WmfProtocol  # noqa: E402
from cltoolkit.suites.wmf.world import RSSM  # noqa: E402

_BY_ARCH = {
    "rssm": "wmf.finetuning",
    "finetuning": "wmf.finetuning",
    "ug_mtm": "wmf.ug-mtm",
    "progressive_nets": "wmf.progressive-nets",
}


def build(model: dict[str, Any], arch: str, action: int, hyper: dict[str, Any] | None = None) -> RSSM:
    """A method's model as the suite builds it (through the method interface), from a model section."""
    from cltoolkit.suites.wmf.api import ModelSpec
    from cltoolkit.suites.wmf.suite import make_method

    name = _BY_ARCH[arch]
    hyper = hyper or {}
    if name == "wmf.finetuning":
        hyper = {}
    elif name == "wmf.progressive-nets":
        hyper = {k: v for k, v in hyper.items() if k == "lateral"}
    method = make_method(name, hyper, registries())
    spec = ModelSpec(model["latent"], model["hidden"], action, tuple(model["channels"]), model["beta"])
    built = method.build(spec)
    if model.get("decoder", "1x1") == "2x2-crop":
        built.vae.use_seed_decoder()
    return built


ROOT = Path(__file__).resolve().parents[2]
SMALL = {"latent": 8, "hidden": 16, "channels": [4, 8, 8, 16], "beta": 1.0}
UG = {"experts": 4, "dropout": 0.1, "mcPasses": 3, "mcPassesEval": 3, "thresholdWindow": 50, "gateLambda": 10.0}


def _protocol(name: str) -> WmfProtocol:
    return WmfProtocol.model_validate_json((ROOT / "protocols" / f"{name}.json").read_text(), strict=True)


def _latents(n: int, latent: int, action: int, seed: int = 0) -> ev.LatentSet:
    g = torch.Generator().manual_seed(seed)
    return ev.LatentSet(
        torch.randn(n, latent, generator=g), torch.randn(n, action, generator=g), torch.randn(n, latent, generator=g)
    )


def test_batched_loss_equals_stepwise_math() -> None:
    """The one-pass loss (each frame encoded once, GRU over the sequence) equals the step-by-step loss, gradients
    included, at a protocol-like shape."""
    torch.manual_seed(0)
    model = RSSM(32, 64, 7, (8, 16, 32, 64), 1.0)
    obs, act, eps = torch.rand(4, 5, 3, 64, 64), torch.rand(4, 4, 7), torch.randn(4, 5, 32)
    batched = model.loss(obs, act, eps)[0]
    grads_b = torch.autograd.grad(batched, list(model.parameters()))
    stepwise = model.loss_stepwise(obs, act, eps)
    grads_s = torch.autograd.grad(stepwise, list(model.parameters()))
    assert torch.allclose(batched, stepwise, rtol=1e-5, atol=1e-4)
    for gb, gs in zip(grads_b, grads_s, strict=True):
        assert torch.allclose(gb, gs, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("method", ["finetuning", "progressive_nets", "ug_mtm"])
def test_pf_and_rd_of_a_model_against_itself_are_zero(method: str) -> None:
    torch.manual_seed(1)
    model = build(SMALL, method, 3, UG)
    if method != "finetuning":
        model.switch()
    d = _latents(40, 8, 3)
    assert ev.nll(model, d, 5) - ev.nll(model, d, 5) == 0.0
    assert ev.rollout_divergence(model, model, d, horizon=15, starts=20, seed=5) == pytest.approx(0.0, abs=1e-6)


def test_rd_is_positive_between_different_models() -> None:
    torch.manual_seed(2)
    a, b = RSSM(8, 16, 3, (4, 8, 8, 16), 1.0), RSSM(8, 16, 3, (4, 8, 8, 16), 1.0)
    assert ev.rollout_divergence(a, b, _latents(40, 8, 3), horizon=5, starts=20, seed=0) > 0.0


def test_ewc_fisher_is_exactly_zero_on_every_encoder_parameter() -> None:
    torch.manual_seed(3)
    model = RSSM(8, 16, 3, (4, 8, 8, 16), 1.0)
    d = _latents(50, 8, 3)
    fisher = fisher_diagonal(model, d.z, d.a, d.z_next)
    encoder = [n for n in fisher if n.startswith("vae.")]
    assert encoder
    assert all(float(fisher[n].abs().max()) == 0.0 for n in encoder)
    assert float(fisher["gru.weight_hh_l0"].abs().max()) == 0.0  # h = 0: the recurrent pathway is unprotected
    assert float(fisher["gru.weight_ih_l0"].abs().max()) > 0.0
    assert float(fisher["head.weight"].abs().max()) > 0.0


def test_d_param_of_the_gym_levels() -> None:
    protocol = _protocol("wmf-v1")
    gym = next(f for f in protocol.families if f.id == "gym")
    vec = {
        lv.id: [(t.physics.gravity, t.physics.massScale, t.physics.frictionScale) for t in (lv.taskA, lv.taskB)]
        for lv in gym.levels
    }
    got = {k: round(ev.d_param(*v), 3) for k, v in vec.items()}  # type: ignore[arg-type]
    assert got == {"min": 0.283, "med": 0.586, "max": 0.622}


def test_switch_freezes_what_the_methods_declare() -> None:
    torch.manual_seed(4)
    prog = ProgressiveRSSM(8, 16, 3, (4, 8, 8, 16), 1.0)
    prog.switch()
    assert not any(p.requires_grad for p in prog.gru.parameters())
    assert all(p.requires_grad for p in prog.vae.parameters())
    ug = build(SMALL, "ug_mtm", 3, UG)
    assert isinstance(ug, UGMTM)
    ug.switch()
    assert int(ug.active) == 1
    assert not any(p.requires_grad for p in [*ug.vae.parameters(), *ug.head.parameters(), *ug.experts[0].parameters()])
    assert all(p.requires_grad for p in ug.experts[1].parameters())


def test_evaluation_never_changes_a_model() -> None:
    torch.manual_seed(5)
    ug = build(SMALL, "ug_mtm", 3, UG)
    before = {k: v.clone() for k, v in ug.state_dict().items()}
    d = _latents(30, 8, 3)
    ev.nll(ug, d, 1)
    ev.rollout_divergence(ug, ug, d, 5, 10, 1)
    assert all(torch.equal(before[k], v) for k, v in ug.state_dict().items())


def _tiny_doc() -> dict:  # type: ignore[type-arg]
    data = json.loads((ROOT / "protocols" / "wmf-lite-v1.json").read_text())
    data["data"].update(trainEpisodes=1, heldOutEpisodes=1, maxEpisodeSteps=30)
    data["model"].update(hidden=16, channels=[4, 8, 8, 16])
    data["training"].update(updatesPerTask=6, curvePoints=3)
    data["evaluation"].update(transitions=20, fisherTransitions=5, reconstructionFrames=10, rdStarts=5, rdHorizon=3)
    data["results"] = None
    data["status"]["stage"] = "draft"
    return data  # type: ignore[no-any-return]


def _tiny(tmp: Path) -> WmfProtocol:
    return WmfProtocol.model_validate_json(json.dumps(_tiny_doc()), strict=True)


def test_runs_share_stages_and_are_deterministic(tmp_path: Path) -> None:
    """Two runs of one seed give identical metrics; the second method reuses the first's data, task-A phase and
    reference stages (and says so), and a fresh store recomputes them bit-identically."""
    from cltoolkit.suites.wmf.driver import run_cell
    from cltoolkit.suites.wmf.suite import make_method

    protocol = _tiny(tmp_path)
    first = run_cell(protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path / "a")
    ewc = run_cell(
        protocol, "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0}, registries()), 0, tmp_path / "a"
    )
    again = run_cell(protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path / "b")
    assert first["reused"] == []
    assert again["reused"] == []
    assert first["metrics"] == again["metrics"]
    reused = {r.split(":")[0] for r in ewc["reused"]}
    assert {"phase-A-rssm", "reference-B-scratch", "data-train-A", "data-heldout-B"} <= reused
    assert ewc["metrics"]["stages"]["phase-A-rssm"] == first["metrics"]["stages"]["phase-A-rssm"]
    assert ewc["metrics"]["ewcFisherEncoderMax"] == 0.0
    assert ewc["metrics"]["reconAAfterA"] == first["metrics"]["reconAAfterA"]  # same task-A model
    assert first["metrics"]["dParam"] is None
    assert first["metrics"]["pis"] is None
    assert len(first["metrics"]["curves"]["A"]) == 3
    other_seed = run_cell(protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 1, tmp_path / "a")
    assert other_seed["metrics"]["stages"]["phase-A-rssm"] != first["metrics"]["stages"]["phase-A-rssm"]


def test_stage_busy_only_while_another_holder_has_its_lock_and_no_file(tmp_path: Path) -> None:
    """busy(): a stage is busy while another open file holds its lock (another run training it) and it is not
    written; never locked, released, or written, it is not."""
    import fcntl
    import os

    from cltoolkit.suites.wmf.stages import StageCache

    cache = StageCache(tmp_path)
    key = {"stage": "phase-A", "seed": 0}
    assert not cache.busy(key)  # no lock file yet
    cache.folder.mkdir(parents=True)
    sha = cache.key_hash(key)
    holder = os.open(cache.folder / f"{sha}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert cache.busy(key)
        assert not cache.busy({"stage": "reference-B", "seed": 0})  # another stage's lock is free
        (cache.folder / f"{sha}.pt").write_bytes(b"")
        assert not cache.busy(key)  # written: get() loads it at once
        (cache.folder / f"{sha}.pt").unlink()
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert not cache.busy(key)
    finally:
        os.close(holder)


@pytest.mark.parametrize("method", ["wmf.finetuning", "wmf.ug-mtm"])
def test_a_run_trains_the_task_b_reference_first_while_the_task_a_model_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """While another run trains the shared task-A model, a run trains the task-B reference first instead of waiting
    for it; every value equals the usual order's (all seeds are derived, none drawn in sequence)."""
    from cltoolkit.suites.wmf.driver import run_cell
    from cltoolkit.suites.wmf.stages import StageCache
    from cltoolkit.suites.wmf.suite import make_method

    params = SEED_UG if method == "wmf.ug-mtm" else {}
    protocol = _tiny(tmp_path)
    usual = run_cell(protocol, "minigrid-min", make_method(method, params, registries()), 0, tmp_path / "a")
    trained: list[str] = []
    get = StageCache.get

    def spy(self: StageCache, name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        trained.append(name)
        return get(self, name, key, *args, **kwargs)

    monkeypatch.setattr(StageCache, "get", spy)
    monkeypatch.setattr(StageCache, "busy", lambda self, key: key["stage"] == "phase-A")
    swapped = run_cell(protocol, "minigrid-min", make_method(method, params, registries()), 0, tmp_path / "b")
    stages = [n for n in trained if not n.startswith("data-")]
    assert stages.index("reference-B-scratch") < min(i for i, n in enumerate(stages) if n.startswith("phase-A-"))
    assert swapped["reused"] == usual["reused"] == []
    assert swapped["metrics"] == usual["metrics"]
    assert swapped["budget"] == usual["budget"]


def test_shipped_wmf_protocols_validate_and_plan() -> None:
    from cltoolkit.suites.wmf.suite import WmfSuite

    suite = WmfSuite()
    full = _protocol("wmf-v1")
    assert list(suite.check(full)) == []
    assert len(suite.plan(full, None)) == 375
    lite = _protocol("wmf-lite-v1")
    assert len(suite.plan(lite, None)) == 9 * 5 * 3
    assert all(p.cell for p in suite.plan(lite, None))
    v2 = _protocol("wmf-v2")
    assert list(suite.check(v2)) == []
    repro = suite.plan(v2, "reproduction")
    assert len(repro) == 45
    assert {p.cell for p in repro} == {"minigrid-min", "minigrid-med", "minigrid-max"}
    assert {p.seed for p in repro} == {0, 1, 2}
    assert len(suite.plan(v2, "main")) == 375


def test_wmf_v2_declares_every_change_from_wmf_v1() -> None:
    """The frozen wmf-v2 against wmf-v1's frozen content: every difference is covered by a declared change and
    every declared change covers one (what `clt protocol freeze` enforced)."""
    from cltoolkit.freeze_actions import declared_change_problems
    from cltoolkit.project import Project

    doc = json.loads((ROOT / "protocols" / "wmf-v2.json").read_text())
    assert declared_change_problems(Project(ROOT), doc) == []
    doc["model"]["beta"] = 2.0  # an edit nobody declared
    problems = declared_change_problems(Project(ROOT), doc)
    assert [p.where for p in problems] == ["/model/beta"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("renderer", "env_id", "gravity"),
    [
        ("minigrid", "MiniGrid-KeyCorridorS3R1-v0", None),
        ("mujoco", "HalfCheetah-v5", 4.0),
        ("mujoco", "HalfCheetah-v4", 4.0),
        ("dm_control", "walker/run", 4.0),
    ],
)
@pytest.mark.parametrize("rendering", ["native-64", "default-resized"])
def test_family_frames_are_64x64_uint8_and_seeded(
    renderer: str, env_id: str, gravity: float | None, rendering: str
) -> None:
    """Every family renders 64x64x3 uint8 frames; one seed collects identical episodes, another seed different ones;
    physics changes reach the simulator."""
    from cltoolkit.suites.wmf.envs import collect, make_env

    env = make_env(renderer, env_id, gravity, 3.0 if gravity else 1.0, 0.5 if gravity else 1.0, rendering)
    try:
        a, b, c = collect(env, 1, 20, 0), collect(env, 1, 20, 0), collect(env, 1, 20, 1)
        if renderer == "mujoco":
            assert env.env.unwrapped.model.opt.gravity[2] == pytest.approx(-4.0)  # type: ignore[attr-defined]
        if renderer == "dm_control":
            assert env.env.physics.model.opt.gravity[2] == pytest.approx(-4.0)  # type: ignore[attr-defined]
    finally:
        env.close()
    assert a.frames.shape[2:] == (64, 64, 3)
    assert a.frames.dtype == np.uint8
    assert np.array_equal(a.frames, b.frames)
    assert np.array_equal(a.actions, b.actions)
    assert not np.array_equal(a.actions, c.actions)


@pytest.mark.e2e
def test_two_runs_of_a_grid_give_identical_records_but_timing(project, cli) -> None:
    """`clt run` twice on fresh stores (one MiniGrid cell, two methods, one seed): the records are identical except
    their timestamps and wall-clock time; then `clt report` fills the results with the suite's analysis."""
    import shutil

    doc = _tiny_doc()
    doc["families"] = [f for f in doc["families"] if f["id"] == "minigrid"]
    doc["families"][0]["levels"] = doc["families"][0]["levels"][:1]
    doc["families"][0]["levels"][0]["seeds"] = [0]
    doc["seeds"]["stages"][0]["seeds"] = [0]
    doc["comparisons"] = doc["comparisons"][:3]
    doc["methodPairs"] = [p for p in doc["methodPairs"] if p["method"] in ("replay-infinite", "ewc")]
    doc["gates"] = [g for g in doc["gates"] if g["method"] in ("finetuning", "ewc", "replay-infinite")]
    doc["budget"]["match"][0]["across"] = [c["id"] for c in doc["comparisons"]]
    (project.root / "protocols" / "wmf-lite-v1.json").write_text(json.dumps(doc, indent=2) + "\n")
    refused = cli("protocol", "freeze", "wmf-lite-v1")  # one seed, one cell: no gate could be tested
    assert refused.exit_code == 1 and "needs at least 2" in refused.output, refused.output
    doc["gates"] = []
    (project.root / "protocols" / "wmf-lite-v1.json").write_text(json.dumps(doc, indent=2) + "\n")
    assert cli("protocol", "freeze", "wmf-lite-v1").exit_code == 0
    store = project.root / "runs" / "wmf-lite-v1"

    def records() -> dict[str, dict]:  # type: ignore[type-arg]
        out = {}
        for path in sorted(store.glob("*/record.json")):
            rec = json.loads(path.read_text())
            for key in ("startedAt", "finishedAt", "wallClockSeconds"):
                rec["provenance"].pop(key)
            rec.pop("seal")  # covers the times
            out[path.parent.name] = rec
        return out

    assert cli("run", "-p", "wmf-lite-v1", "--workers", "1").exit_code == 0
    first = records()
    shutil.rmtree(store)
    assert cli("run", "-p", "wmf-lite-v1", "--workers", "1", "--device", "cpu").exit_code == 0
    assert len(first) == 3
    assert records() == first
    assert {r["provenance"]["device"] for r in first.values()} == {"cpu"}  # the default device, recorded
    assert cli("report", "-p", "wmf-lite-v1").exit_code == 0
    results = json.loads((project.root / "protocols" / "wmf-lite-v1.json").read_text())["results"]
    assert results["gates"] == []
    report = (project.root / "reports" / "wmf-lite-v1" / "report.md").read_text()
    assert "Forgetting per cell" in report
    assert "| minigrid-min | ewc | 1 |" in report
    sizes = results["summaries"]["evaluationSizes"]
    assert sizes["recorded"] == 3
    assert sizes["notRecorded"] == []
    assert "## Realized evaluation-set sizes" in report and "## Fixed in code, not protocol fields" in report


def test_evaluation_sizes_list_every_shortfall_by_run() -> None:
    from types import SimpleNamespace

    from cltoolkit.suites.wmf.analysis import _evaluation_sizes

    protocol = SimpleNamespace(
        evaluation=SimpleNamespace(transitions=100, fisherTransitions=50, reconstructionFrames=200)
    )
    full = {"transitionsA": 100, "fisherTransitions": None, "framesA": 200, "framesB": 200}
    short = {"transitionsA": 100, "fisherTransitions": 45, "framesA": 145, "framesB": 200}
    records = [
        SimpleNamespace(runId="finetuning-x-s0", metrics={"evaluationSizes": full}),
        SimpleNamespace(runId="ewc-x-s2", metrics={"evaluationSizes": short}),
        SimpleNamespace(runId="ewc-x-s1", metrics={}),
    ]
    out = _evaluation_sizes(protocol, records)  # type: ignore[arg-type]
    assert out["recorded"] == 2
    assert out["notRecorded"] == ["ewc-x-s1"]
    assert out["shortfalls"] == [
        {"run": "ewc-x-s2", "set": "fisherTransitions", "realized": 45, "declared": 50},
        {"run": "ewc-x-s2", "set": "framesA", "realized": 145, "declared": 200},
    ]


def test_suite_check_names_bad_pairs_and_physics() -> None:
    from cltoolkit.suites.wmf.suite import WmfSuite

    doc = json.loads((ROOT / "protocols" / "wmf-lite-v1.json").read_text())
    doc["methodPairs"][0]["reference"] = "nobody"
    doc["families"][0]["levels"][0]["taskB"]["physics"] = {"gravity": 3.0}
    protocol = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    where = {p.where for p in WmfSuite().check(protocol)}
    assert where == {"/methodPairs/0/reference", "/families/0/levels/0"}


def test_stage_cache_loads_data_only_after_its_digest(tmp_path: Path) -> None:
    import hashlib
    import io
    import pickle

    from cltoolkit.suites.wmf.stages import StageCache

    calls: list[int] = []

    def compute() -> dict[str, object]:
        calls.append(1)
        return {"state": {"w": torch.arange(6.0).reshape(2, 3)}, "curve": [1.5, 0.5], "nanSteps": 0}

    key = {"stage": "test", "seed": 0}
    first, sha = StageCache(tmp_path).get("s", key, compute)
    cache = StageCache(tmp_path)
    again, _ = cache.get("s", key, compute)
    assert calls == [1]
    assert cache.reused == [f"s:{sha}"]
    assert torch.equal(again["state"]["w"], first["state"]["w"])
    assert again["curve"] == [1.5, 0.5]
    folder = tmp_path / ".wmf-stages"
    data = (folder / f"{sha}.pt").read_bytes()
    (folder / f"{sha}.pt").write_bytes(data[:-8] + b"\0" * 8)  # changed content
    with pytest.raises(RuntimeError, match="does not match its MAC under this machine's key"):
        StageCache(tmp_path).get("s", key, compute)
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(marker),))

    planted = pickle.dumps(Planted(), protocol=2)
    (folder / f"{sha}.pt").write_bytes(planted)  # a planted pickle, even with a matching digest beside it
    (folder / f"{sha}.sha256").write_text(hashlib.sha256(planted).hexdigest())
    cache = StageCache(tmp_path)
    value, _ = cache.get("s", key, compute)  # never loaded: the digest is no MAC of this machine's, so recomputed
    assert not marker.exists()
    assert calls == [1, 1] and cache.reused == []
    assert torch.equal(value["state"]["w"], first["state"]["w"])
    assert (folder / f"{sha}.sha256").read_text().startswith("hmac-sha256:")
    with pytest.raises(pickle.UnpicklingError):  # and were it loaded, only as data (weights_only)
        torch.load(io.BytesIO(planted), weights_only=True)
    assert not marker.exists()


@pytest.mark.committed
def test_reproduction_of_seed_000_compares_with_the_stored_runs(monkeypatch) -> None:
    import statistics

    from cltoolkit.component_validation import load_protocol
    from cltoolkit.run.record import read_record
    from cltoolkit.suites.wmf.reproduction.reference import report_lines
    from tests.conftest import REPO

    monkeypatch.setenv("CLT_ROOT", str(REPO))
    protocol = load_protocol(REPO / "protocols" / "wmf-lite-v1.json", regs=registries()).model
    protocol = protocol.model_copy(update={"reference": "reference/wmf-seed000-metrics.json"})
    records = [read_record(p) for p in sorted((REPO / "runs" / "wmf-lite-v1").glob("*/record.json"))]
    assert isinstance(protocol, WmfProtocol)
    rep = registries().new_analysis("wmf").summaries(protocol, records)["reproduction"]
    assert len(rep["rows"]) == 45
    assert len(rep["rdRankings"]) == 9
    row = next(r for r in rep["rows"] if r["cell"] == "minigrid-min" and r["method"] == "finetuning")
    ours = [r.metrics["pf"] for r in records if r.spec.cell == "minigrid-min" and r.spec.comparison == "finetuning"]
    assert row["quantities"]["pf"]["clt"]["mean"] == pytest.approx(statistics.mean(float(v) for v in ours))  # type: ignore[arg-type]
    stored = json.loads((REPO / "reference" / "wmf-seed000-metrics.json").read_text())["runs"]
    theirs = [r["metrics"]["pf"] for r in stored if r["family"] == "minigrid" and r["distance"] == "min"
              and r["method"] == "finetuning"]  # fmt: skip
    seed_stats = row["quantities"]["pf"]["seed"]
    assert seed_stats["n"] == len(theirs)
    assert seed_stats["mean"] == pytest.approx(statistics.mean(theirs))
    assert all(-1 <= r["kendallTau"] <= 1 for r in rep["rdRankings"].values() if r["kendallTau"] is not None)
    text = "\n".join(report_lines(rep))
    assert "## Reproduction of WorldModelsBenchmark" in text and "| minigrid-min | finetuning |" in text
    outside = [(r, n) for r in rep["rows"] for n, q in r["quantities"].items() if q["cltMeanInsideSeedRange"] is False]
    assert len(outside) == rep["insideSeedRange"]["of"] - rep["insideSeedRange"]["count"] > 0  # the lite budget
    bullets = {x.split(" ", 2)[1]: x for x in text.split("Outside the seed's range")[1].split("\n\n")[1].splitlines()}
    for cell in {r["cell"] for r, _ in outside}:
        mine = [(r, n) for r, n in outside if r["cell"] == cell]
        assert bullets[cell].startswith(f"- {cell} ({len(mine)} outside): ")
        assert bullets[cell].count(";") == len(mine) - 1
        assert all(f"{r['method']} {n} " in bullets[cell] for r, n in mine)
    glance = rep["perCell"]  # each cell at a glance adds up to the whole
    assert sorted(glance) == sorted(rep["rdRankings"])
    assert sum(g["inside"]["count"] for g in glance.values()) == rep["insideSeedRange"]["count"]
    assert sum(g["inside"]["of"] for g in glance.values()) == rep["insideSeedRange"]["of"]
    assert sum(g["byConstruction"] for g in glance.values()) == rep["byConstruction"]["count"]
    assert all(g["rdKendallTau"] == rep["rdRankings"][c]["kendallTau"] for c, g in glance.items())
    built = {(c["cell"], c["method"], c["quantity"]) for c in rep["byConstruction"]["checks"]}
    flagged = [(r["cell"], r["method"], n, q["cltMeanInsideSeedRange"]) for r in rep["rows"]
               for n, q in r["quantities"].items() if q["cltMeanInsideSeedRange"] is not None]  # fmt: skip
    informative = [f for c, m, n, f in flagged if (c, m, n) not in built]
    assert 0 < len(built) and len(informative) < len(flagged)  # the lite runs share their task-A model too
    assert sum(g["informativeInside"]["of"] for g in glance.values()) == len(informative)
    assert sum(g["informativeInside"]["count"] for g in glance.values()) == sum(informative)
    assert f"; {sum(informative)} of the {len(informative)} not equal by construction)" in text
    minigrid = sum(g["inside"]["count"] for c, g in glance.items() if c.startswith("minigrid-"))
    assert f"minigrid {minigrid} of " in text and "| minigrid-min | " in text.split("Per cell at a glance")[1]


def test_a_mean_outside_the_seeds_range_never_prints_equal_to_its_bound() -> None:
    from cltoolkit.suites.wmf.reproduction.reference import apart

    assert apart(1.0804, 0.922, 1.0801) == ("1.0804", "0.922", "1.0801")
    assert apart(607.2, 635.0, 1180.0) == ("607", "635", "1.18e+03")


def test_the_seed_decoder_reshapes_to_2x2_and_crops_80_to_64() -> None:

    model = {"latent": 8, "hidden": 16, "channels": [4, 8, 16, 32], "beta": 1.0}
    default = build(model, "rssm", 3)
    seed = build({**model, "decoder": "2x2-crop"}, "rssm", 3)
    z = torch.randn(2, 8)
    assert default.vae.decode(z).shape == seed.vae.decode(z).shape == (2, 3, 64, 64)
    vae = seed.vae
    full = vae.decoder(vae.expand(z).view(-1, 32, 2, 2))
    assert full.shape == (2, 3, 80, 80)  # 2 -> 7 -> 17 -> 38 -> 80 before the crop
    assert torch.equal(vae.decode(z), full[:, :, 8:72, 8:72])  # the centre 64 x 64
    first, plain = vae.decoder[0], default.vae.decoder[0]
    assert isinstance(first, torch.nn.ConvTranspose2d)
    assert isinstance(plain, torch.nn.ConvTranspose2d)
    assert first.in_channels == 32  # not 4 x 32 as in 1x1
    assert first.weight.numel() * 4 == plain.weight.numel()  # the 1x1 decoder's is 4x larger


def test_the_ewc_penalty_factor_half_or_full() -> None:
    from cltoolkit.suites.wmf.method_models import EwcPenalty

    model = build({"latent": 4, "hidden": 8, "channels": [4, 4, 8, 8], "beta": 1.0}, "rssm", 2)
    anchor = {n: p.detach().clone() + 0.5 for n, p in model.named_parameters() if n.startswith("gru")}
    fisher = {n: torch.full_like(a, 2.0) for n, a in anchor.items()}
    count = sum(a.numel() for a in anchor.values())
    half = EwcPenalty(fisher, anchor, 3.0)(model).detach()  # (lambda / 2) sum F d^2 = 1.5 x 2 x 0.25 x count
    full = EwcPenalty(fisher, anchor, 3.0, 1.0)(model).detach()  # seed 000: lambda sum F d^2
    assert float(half) == pytest.approx(1.5 * 2.0 * 0.25 * count)
    assert float(full) == pytest.approx(2 * float(half))


def test_the_seed_progressive_column_reads_a_lateral_projection_of_the_shared_state() -> None:

    model = {"latent": 4, "hidden": 6, "channels": [4, 4, 8, 8], "beta": 1.0}
    seed = build(model, "progressive_nets", 2, {"lateral": "shared-state"})
    ours = build(model, "progressive_nets", 2, None)
    for m in (seed, ours):
        m.switch()
    assert isinstance(seed.lateral, torch.nn.Linear)
    assert tuple(seed.lateral.weight.shape) == (6, 6)
    assert ours.lateral is None
    z, a = torch.randn(3, 4), torch.randn(3, 2)
    h = seed.initial(3, z)
    assert h.shape == (3, 6) and ours.initial(3, z).shape == (3, 12)  # one shared state vs one per column
    x = torch.cat([z, a], -1)
    frozen = seed.gru(x.unsqueeze(1), h.unsqueeze(0))[1].squeeze(0)
    expected = seed.column2(torch.cat([x, seed.lateral(frozen)], -1).unsqueeze(1), h.unsqueeze(0))[1].squeeze(0)
    assert torch.allclose(seed.step(h, z, a), expected)
    assert any(p is seed.lateral.weight for p in seed.transition_parameters())  # trained with the new column
    states, _ = seed.sequence(z.unsqueeze(1).repeat(1, 4, 1), a.unsqueeze(1).repeat(1, 4, 1))
    assert states.shape == (3, 4, 6)
    assert torch.allclose(states[:, 0], seed.step(seed.initial(3, z), z, a), atol=1e-6)


def test_the_seed_options_run_a_cell_end_to_end(tmp_path: Path) -> None:
    """The seed-faithful options (decoder 2x2-crop, shared-state progressive columns, the full EWC factor) run a
    tiny cell to finite metrics; the full factor doubles nothing but the penalty (the task-A phase is shared)."""
    import math

    from cltoolkit.suites.wmf.driver import run_cell
    from cltoolkit.suites.wmf.suite import make_method

    doc = _tiny_doc()
    doc["model"]["decoder"] = "2x2-crop"
    protocol = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    store = tmp_path / "s"
    prog = run_cell(
        protocol,
        "minigrid-min",
        make_method("wmf.progressive-nets", {"lateral": "shared-state"}, registries()),
        0,
        store,
    )
    half = run_cell(protocol, "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0}, registries()), 0, store)
    full = run_cell(
        protocol, "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0, "penalty": "full"}, registries()), 0, store
    )
    pooled = {"taskAShare": 0.5, "sampling": "uniform-episodes"}
    replay = run_cell(protocol, "minigrid-min", make_method("wmf.replay-infinite", pooled, registries()), 0, store)
    doc["families"][0]["rendering"] = "default-resized"
    seeded = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    ug = run_cell(seeded, "minigrid-min", make_method("wmf.ug-mtm", SEED_UG, registries()), 0, tmp_path / "u")
    assert math.isfinite(ug["metrics"]["pf"])
    assert ug["metrics"]["reconARandomInit"] > 0
    assert ug["metrics"]["firstUpdateReconstructionLossA"] is not None
    # its own task A, the plain task-A reference, the task-B reference and its task B
    assert ug["budget"]["updatesExecuted"] == 4 * doc["training"]["updatesPerTask"]
    assert not any(s.startswith("data-") for s in ug["reused"])  # the seed's frames are other data than wmf-v1's
    assert prog["budget"]["parameters"] > half["budget"]["parameters"] > 0  # the second column and its lateral
    assert half["budget"]["updatesExecuted"] == full["budget"]["updatesExecuted"] == doc["training"]["updatesPerTask"]
    for out in (prog, half, full, replay):
        assert all(math.isfinite(v) for k, v in out["metrics"].items() if k in ("pf", "rd", "reconAAfterB"))
    assert any(r.startswith("phase-A-rssm") for r in full["reused"])  # the same task-A phase as every plain method
    assert half["metrics"]["reconBAfterB"] != full["metrics"]["reconBAfterB"]  # the penalty changed task B's training


def test_pooled_replay_picks_episodes_uniformly_then_a_start() -> None:
    from cltoolkit.suites.wmf.train import _pooled_rows

    # source 0: one long episode (97 windows); source 1: three short ones (2 windows each)
    long_win = np.array([(0, s) for s in range(97)])
    short_win = np.array([(e, s) for e in range(3) for s in range(2)])
    rng = np.random.default_rng(0)
    counts = np.zeros(4)
    for _ in range(500):
        rows = _pooled_rows([(None, 4), (None, 4)], [long_win, short_win], rng)  # type: ignore[list-item]
        assert sum(len(r) for r in rows) == 8
        counts[0] += len(rows[0])
        for e, _s in rows[1]:
            counts[1 + e] += 1
    share = counts / counts.sum()
    assert np.allclose(share, 0.25, atol=0.03)  # each episode equally often, whatever its length


SEED_UG = {
    **UG,
    "mcPasses": 10,
    "mcPassesEval": 20,
    "expertInit": "per-expert-generator",
    "thresholdHistory": "per-step",
    "mcEstimates": "separate",
    "gradientFactor": "last-step-gate",
    "calibrationSteps": "all",
}


def _count_passes(model: UGMTM) -> list[int]:
    calls = [0]
    model.unc.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def test_the_seed_experts_come_from_their_own_generators() -> None:
    """Expert k: uniform(+-1/sqrt(hidden)) from a generator seeded k * 1337 + 42, whatever the run's seed."""
    import math

    torch.manual_seed(0)
    a = build(SMALL, "ug_mtm", 3, SEED_UG)
    torch.manual_seed(1)
    b = build(SMALL, "ug_mtm", 3, SEED_UG)
    assert isinstance(a, UGMTM)
    assert isinstance(b, UGMTM)
    stdv = 1 / math.sqrt(float(SMALL["hidden"]))  # type: ignore[arg-type]
    for k in range(4):
        g = torch.Generator().manual_seed(k * 1337 + 42)
        for p, q in zip(a.experts[k].parameters(), b.experts[k].parameters(), strict=True):
            assert torch.equal(p, torch.empty_like(p).uniform_(-stdv, stdv, generator=g))
            assert torch.equal(p, q)
    assert not torch.equal(a.unc[0].weight, b.unc[0].weight)  # the rest still follows the run's seed
    torch.manual_seed(0)
    v1 = build(SMALL, "ug_mtm", 3, UG)
    assert isinstance(v1, UGMTM)
    assert not torch.equal(v1.experts[0].weight_ih, a.experts[0].weight_ih)


@pytest.mark.parametrize(("params", "train_passes", "entries"), [(UG, 3, 1), (SEED_UG, 2 * 10, 4)])
def test_ug_mtm_pass_counts_and_history_per_update(params: dict[str, Any], train_passes: int, entries: int) -> None:
    """wmf-v1: one MC estimate of 3 passes, one history entry per update. Seed: two estimates of 10 passes (gate and
    calibration), one history entry per transition of the 5-frame window (4); evaluation uses 20 passes (seed)."""
    torch.manual_seed(0)
    model = build(SMALL, "ug_mtm", 3, params)
    assert isinstance(model, UGMTM)
    calls = _count_passes(model)
    model.train()
    model.loss(torch.rand(2, 5, 3, 64, 64), torch.rand(2, 4, 3), torch.randn(2, 5, 8))
    assert calls[0] == train_passes
    assert int(model.filled) == entries
    model.eval()
    calls[0] = 0
    before = model.history.clone()
    model.step(torch.zeros(2, 16), torch.randn(2, 8), torch.randn(2, 3))
    assert calls[0] == params["mcPassesEval"]
    assert torch.equal(model.history, before)  # evaluation never writes the history


def test_the_seed_gradient_hook_scales_each_expert_by_its_last_step_gate() -> None:
    """Same weights, same random draws: with last-step-gate every trainable expert's gradient is the plain gradient
    times that expert's batch-mean gate at the window's last step; nothing else changes."""
    torch.manual_seed(0)
    plain = build(SMALL, "ug_mtm", 3, UG)
    hooked = build(SMALL, "ug_mtm", 3, {**UG, "gradientFactor": "last-step-gate"})
    assert isinstance(plain, UGMTM)
    assert isinstance(hooked, UGMTM)
    hooked.load_state_dict(plain.state_dict())
    for m in (plain, hooked):
        m.switch()  # task B: expert 1 active, expert 0 frozen
        m.train()
    obs, act, eps = torch.rand(3, 5, 3, 64, 64), torch.rand(3, 4, 3), torch.randn(3, 5, 8)
    grads = []
    for m in (plain, hooked):
        torch.manual_seed(7)
        m.zero_grad()
        m.loss(obs, act, eps)[0].backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
    factor = None
    for n, g in grads[0].items():
        if n.startswith("experts.1."):
            ratio = grads[1][n] / g
            finite = ratio[g.abs() > 1e-8]
            factor = float(finite.mean())
            assert torch.allclose(finite, torch.full_like(finite, factor), rtol=1e-3)
        else:
            assert torch.allclose(grads[1][n], g)
    assert factor is not None
    assert 0.0 < factor < 1.0
    assert not any(n.startswith("experts.0.") for n in grads[1])  # frozen: no gradient, no hook


def test_the_seed_rendering_resizes_minigrid_default_frames_with_pil_bilinear() -> None:
    """default-resized: MiniGrid's default rgb_array frame (tile size 32: 256 x 256 for an 8 x 8 grid), then PIL
    bilinear to 64 x 64 (seed 000's `_resize_obs`), which is not the tile-size-8 frame of wmf-v1."""
    import gymnasium as gym
    from PIL import Image

    from cltoolkit.suites.wmf.envs import make_env

    seed_env = gym.make("MiniGrid-Empty-8x8-v0", render_mode="rgb_array")
    seed_env.reset(seed=3)
    raw = seed_env.render()
    assert isinstance(raw, np.ndarray)
    assert raw.shape == (256, 256, 3)
    expected = np.asarray(Image.fromarray(raw).resize((64, 64), Image.Resampling.BILINEAR))
    seed_env.close()
    ours, v1 = (
        make_env("minigrid", "MiniGrid-Empty-8x8-v0", rendering="default-resized"),
        make_env("minigrid", "MiniGrid-Empty-8x8-v0"),
    )
    try:
        frame, native = ours.reset(3), v1.reset(3)
    finally:
        ours.close()
        v1.close()
    assert np.array_equal(frame, expected)
    assert frame.shape == native.shape == (64, 64, 3)
    assert not np.array_equal(frame, native)


def _lite_records() -> tuple[WmfProtocol, list]:  # type: ignore[type-arg]
    from cltoolkit.run.record import read_record
    from tests.conftest import REPO

    protocol = _protocol("wmf-lite-v1")
    return protocol, [read_record(p) for p in sorted((REPO / "runs" / "wmf-lite-v1").glob("*/record.json"))]


@pytest.mark.committed
def test_adequacy_names_each_under_trained_model_and_the_metrics_resting_on_it() -> None:
    """Thresholds from the protocol: a task-A model is flagged by seed when its fit gain is below the minimum or its
    held-out reconstruction exceeds the ratio of the same model's at initialisation; the from-scratch reference by
    its ratio; the headline says which metrics of which cell rest on it."""
    from cltoolkit.suites.wmf.models import Adequacy
    from cltoolkit.suites.wmf.reproduction.seedstats import adequacy, adequacy_headline

    protocol, records = _lite_records()
    patched = []
    for r in records:
        m = dict(r.metrics)
        m["reconARandomInit"] = m["reconAAfterA"] * (2.0 if (r.spec.cell, r.spec.seed) == ("gym-min", 1) else 100.0)
        m["reconBReferenceInit"] = m["reconBFromScratch"] * (100.0 if r.spec.cell != "dmc-max" else 5.0)
        patched.append(r.model_copy(update={"metrics": m}))
    thresholds = Adequacy(taskAFitGainMin=10.0, reconstructionRatioMax=0.1, rationale="test")
    summary = adequacy(protocol.model_copy(update={"adequacy": thresholds}), patched)
    flagged = {(f["cell"], f["model"]): f["seeds"] for f in summary["underTrained"]}
    assert flagged[("gym-min", "task-A model of finetuning")] == [1]  # 0.5 > 0.1
    assert flagged[("dmc-max", "task-B from-scratch reference")] == [0, 1, 2]  # 0.2 > 0.1
    low_gain = {(r.spec.cell, r.spec.comparison, r.spec.seed) for r in patched if r.metrics["taskAFitGain"] < 10.0}
    for cell, comp, seed in low_gain:
        assert seed in flagged[(cell, f"task-A model of {comp}")]
    text = "\n".join(adequacy_headline(summary))
    assert "gym-min: the task-A model of finetuning (seeds 1 of 3) - PF, RD, WMF" in text
    assert "dmc-max: the task-B from-scratch reference (seeds 0, 1, 2 of 3) - FT" in text
    assert "no adequacy thresholds" in "\n".join(adequacy_headline(adequacy(protocol, records)))


@pytest.mark.committed
def test_seed_analyses_follow_the_seed_definitions() -> None:
    """Axis = median over the axis methods of each method's median RD; control cell = no method's median relative
    task-A loss above the threshold; d_z = mean / SD (ddof 1) of paired differences; skew = max - median > factor x
    (median - min)."""
    from cltoolkit.suites.wmf.models import SeedAnalyses
    from cltoolkit.suites.wmf.reproduction.seedstats import seed_analyses, seed_lines

    protocol, records = _lite_records()
    axis_methods = ["finetuning", "replay-infinite", "ewc", "progressive-nets"]
    sa = SeedAnalyses(axisMethods=axis_methods, controlThreshold=0.10, skewFactor=5.0)
    out = seed_analyses(protocol.model_copy(update={"seedAnalyses": sa}), records)

    def values(cell: str, comp: str, key: str) -> list[float]:
        return [r.metrics[key] for r in records if r.spec.cell == cell and r.spec.comparison == comp]

    want = float(np.median([np.median(values("minigrid-med", m, "rd")) for m in axis_methods]))
    row = next(a for a in out["axis"] if a["cell"] == "minigrid-med")
    assert row["rd"] == pytest.approx(want)
    assert row["level"] == 1
    for cell in protocol.cell_ids():
        worst = max(
            float(np.median([(r.metrics["reconAAfterB"] - r.metrics["reconAAfterA"]) / r.metrics["reconAAfterA"]
                             for r in records if r.spec.cell == cell and r.spec.comparison == c.id]))
            for c in protocol.comparisons
        )  # fmt: skip
        assert (cell in out["controlCells"]) == (worst <= 0.10)
    pair = protocol.methodPairs[0]
    diffs = np.asarray(values("gym-max", pair.method, pair.metric)) - np.asarray(
        values("gym-max", pair.reference, pair.metric)
    )
    dz = next(e for e in out["dZ"] if e["method"] == pair.method and e["metric"] == pair.metric)["perCell"]["gym-max"]
    assert dz == pytest.approx(diffs.mean() / diffs.std(ddof=1))
    for s in out["rightSkewed"]:
        v = sorted(s["values"])
        assert v[-1] - np.median(v) > 5.0 * (np.median(v) - v[0])
    assert "## Control cells" in "\n".join(seed_lines(out))


def test_the_seed_calibration_covers_every_transition_of_the_window() -> None:
    """calibrationSteps all (seed 000): the uncertainty at step t is fitted to ||z_{t+1} - m(h_{t+1})||^2 for every
    transition of the window, the last included; all-but-last (wmf-v1) leaves the last transition out."""
    torch.manual_seed(0)
    seed = build(SMALL, "ug_mtm", 3, {**UG, "calibrationSteps": "all"})
    v1 = build(SMALL, "ug_mtm", 3, UG)
    assert isinstance(seed, UGMTM)
    assert isinstance(v1, UGMTM)
    v1.load_state_dict(seed.state_dict())
    z, a, z_next = torch.randn(2, 4, 8), torch.randn(2, 4, 3), torch.randn(2, 4, 8)
    seen = []
    for model in (seed, v1):
        model.eval()  # fixed gates: the uncertainty head's dropout still samples, so capture what it returns
        calls: list[Any] = []

        def captured(x: Any, calls: list[Any] = calls, m: UGMTM = model) -> Any:
            calls.append(UGMTM.uncertainty(m, x))
            return calls[-1]

        model.uncertainty = captured  # type: ignore[method-assign]
        torch.manual_seed(3)
        hseq, aux = model.sequence(z, a, z_next)
        u = calls[0].view(2, 4)
        mu = model.prior(hseq)[0].detach()
        seen.append((aux, u, mu))
    aux, u, mu = seen[0]
    assert torch.allclose(aux, torch.nn.functional.mse_loss(u, (z_next - mu).pow(2).mean(-1)))
    aux, u, mu = seen[1]
    assert torch.allclose(aux, torch.nn.functional.mse_loss(u[:, :-1], (z[:, 1:] - mu[:, :-1]).pow(2).mean(-1)))
