"""wmf-v3's options that follow seed 000's code where wmf-v2 did not (its errata 2-7): each does what it says, and
at its default nothing changes (wmf-v1 and wmf-v2 runs and stage keys stay as they were)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("minigrid")

from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.suites.wmf.data import stored_as_the_seed_does  # noqa: E402
from cltoolkit.suites.wmf.driver import run_cell  # noqa: E402
from cltoolkit.suites.wmf.envs import Episodes  # noqa: E402
from cltoolkit.suites.wmf.models import WmfProtocol  # noqa: E402
from cltoolkit.suites.wmf.suite import make_method  # noqa: E402
from cltoolkit.suites.wmf.train import _pooled_rows  # noqa: E402
from cltoolkit.suites.wmf.world import gaussian_kl, gaussian_nll  # noqa: E402
from tests.suites.test_wmf import _tiny_doc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _episodes(lengths: list[int], steps: int = 12) -> Episodes:
    n = len(lengths)
    return Episodes(
        np.zeros((n, steps + 1, 64, 64, 3), np.uint8), np.zeros((n, steps, 2), np.float32), np.asarray(lengths)
    )


def test_terminal_frames_and_short_episodes_are_dropped_as_the_seed_buffer_does() -> None:
    data = _episodes([10, 3, 5])
    stored = stored_as_the_seed_does(data, 5)
    starts = {e: sorted(s for ee, s in stored.windows(5).tolist() if ee == e) for e in range(3)}
    assert starts == {0: [0, 1, 2, 3, 4, 5], 1: [], 2: [0]}  # frames 0..n-1 only; 3 < 5 steps: unused
    assert max(t for e, t in stored.transitions().tolist() if e == 0) == 8  # (frame 8, frame 9): never frame 10
    assert data.windows(5).tolist().count([0, 6]) == 1  # as stored: the window ending in the terminal frame


def test_episode_then_start_weighs_episodes_equally() -> None:
    data = _episodes([40, 5])
    win = data.windows(5)
    rng = np.random.default_rng(0)
    rows = np.concatenate([_pooled_rows([(data, 8)], [win], rng)[0] for _ in range(500)])
    share_short = float(np.mean(rows[:, 0] == 1))
    assert 0.45 < share_short < 0.55  # uniformly over windows it would be 2 / 39
    assert float(np.mean(win[:, 0] == 1)) < 0.06


def test_variance_epsilon_is_the_seed_formula_and_zero_is_exact() -> None:
    g = torch.Generator().manual_seed(0)
    mu_q, lv_q, mu_p, lv_p = (torch.randn(4, 3, generator=g) for _ in range(4))
    assert torch.equal(gaussian_kl(mu_q, lv_q, mu_p, lv_p, 0.0), gaussian_kl(mu_q, lv_q, mu_p, lv_p))
    seed = 0.5 * torch.sum(lv_p - lv_q + (lv_q.exp() + (mu_q - mu_p).pow(2)) / (lv_p.exp() + 1e-8) - 1, dim=-1)
    assert torch.allclose(gaussian_kl(mu_q, lv_q, mu_p, lv_p, 1e-8), seed, rtol=1e-6, atol=0)
    tiny = torch.full((1, 3), -30.0)  # variance 1e-13: the seed's term is bounded, the exact one is not
    assert gaussian_nll(torch.ones(1, 3), torch.zeros(1, 3), tiny, 1e-8).item() < 2e8
    assert gaussian_nll(torch.ones(1, 3), torch.zeros(1, 3), tiny).item() > 1e12


def _protocol(**options: Any) -> WmfProtocol:
    doc = _tiny_doc()
    for section, values in options.items():
        doc[section].update(values)
    return WmfProtocol.model_validate_json(json.dumps(doc), strict=True)


def test_each_seed_option_changes_what_it_names_and_the_defaults_change_nothing(tmp_path: Path) -> None:
    base = run_cell(
        _protocol(), "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0}, registries()), 0, tmp_path / "base"
    )
    explicit = _protocol(
        data={"windows": "uniform-over-windows", "terminalFrame": "stored", "collectionSeeds": "by-task"},
        model={"initialisation": "shared", "varianceEpsilon": 0.0},
        evaluation={"fisherSet": "disjoint-from-DA"},
    )
    same = run_cell(
        explicit, "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0}, registries()), 0, tmp_path / "base"
    )
    assert same["metrics"] == base["metrics"]
    reused = {r.split(":")[0] for r in same["reused"]}  # the same stage keys: every stage of the first run reused
    assert {"phase-A-rssm", "reference-B-scratch", "data-train-A", "data-heldout-B"} <= reused

    seedlike = _protocol(
        data={"windows": "episode-then-start", "terminalFrame": "dropped", "collectionSeeds": "by-role"},
        model={"initialisation": "independent", "varianceEpsilon": 1e-8},
        evaluation={"fisherSet": "independent"},
    )
    out = run_cell(
        seedlike, "minigrid-min", make_method("wmf.ewc", {"lambda": 1000.0}, registries()), 0, tmp_path / "v3"
    )
    m, b = out["metrics"], base["metrics"]
    assert out["reused"] == []  # new data keys (by role), so nothing is shared with the defaults' stages
    assert m["dTrans"] != b["dTrans"]
    assert m["nllARandomInit"] != b["nllARandomInit"]
    assert m["stages"] != b["stages"]


def test_wmf_v3_sets_each_option_to_the_seed_value_and_declares_it() -> None:
    doc = json.loads((ROOT / "protocols" / "wmf-v3.json").read_text())
    assert doc["data"]["windows"] == "episode-then-start"
    assert doc["data"]["terminalFrame"] == "dropped"
    assert doc["data"]["collectionSeeds"] == "by-role"
    assert doc["evaluation"]["fisherSet"] == "independent"
    assert doc["model"]["initialisation"] == "independent"
    assert doc["model"]["varianceEpsilon"] == 1e-08
    declared = {p for c in doc["changes"] for p in c["pointers"]}
    for pointer in ("/data/windows", "/data/terminalFrame", "/data/collectionSeeds", "/model/initialisation",
                    "/model/varianceEpsilon", "/evaluation/fisherSet"):  # fmt: skip
        assert pointer in declared
    assert len(doc["seeds"]["stages"][0]["cells"]) == 9
    errata = json.loads((ROOT / "protocols" / "wmf-v2.json").read_text())["status"]["errata"]
    assert len(errata) >= 7
    assert any("ewc.py" in e["text"] for e in errata)
