"""The seed's findings re-tested and the agreement's tightness (issue #32), checked on the seed's own stored runs:
the code gives the seed's published Spearman values, exact permutation p-values, and calibrations that could fail."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cltoolkit.suites.wmf.reproduction.findings import exact_spearman, findings, findings_lines, rho_calibration
from cltoolkit.suites.wmf.reproduction.reference import load_reference, ranking_calibration, tightness

ROOT = Path(__file__).resolve().parents[2]
AXIS = ["finetuning", "replay-infinite", "ewc", "progressive-nets"]


@pytest.fixture(scope="module")
def seed_runs():
    return load_reference(ROOT / "reference" / "wmf-seed000-metrics.json")


def test_the_seed_first_finding_is_recomputed_from_its_stored_runs(seed_runs) -> None:
    sp = findings([], seed_runs, AXIS)["spearman"]["seedAllCells"]
    # seed 000's paper: 0.00 for the label, 0.58 (d_trans) and 0.43 (task-B difficulty) over the nine cells
    assert round(sp["level"]["rho"], 2) == 0.0
    assert sp["level"]["n"] == 9
    assert round(sp["dTrans"]["rho"], 2) == 0.58
    assert round(sp["taskBDifficulty"]["rho"], 2) == 0.43
    assert sp["dTrans"]["pKind"] == "exact, all 362880 orders, two-sided"
    assert 0.05 < sp["dTrans"]["p"] < 0.2


def test_exact_spearman_p_is_the_share_of_orders_at_least_as_extreme() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 1.0, 4.0, 3.0, 5.0]
    out = exact_spearman(x, y)
    from scipy.stats import spearmanr

    assert out["rho"] == pytest.approx(spearmanr(x, y).statistic)
    count = sum(abs(spearmanr(x, p).statistic) >= out["rho"] - 1e-12 for p in itertools.permutations(y))
    assert out["p"] == pytest.approx(count / 120)
    assert exact_spearman([1.0, 2.0], [1.0, 2.0])["rho"] is None  # too few cells: no rho, no p
    assert exact_spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])["rho"] is None  # no spread: undefined, not 0


def test_three_of_the_seed_own_runs_rank_methods_like_all_of_them_only_sometimes(seed_runs) -> None:
    cal = ranking_calibration(seed_runs, ["minigrid-max", "gym-min"], draws=300)
    assert set(cal) == {"minigrid-max", "gym-min"}
    for cell in cal.values():
        assert 0.0 < cell["equalShare"] < 1.0
        assert cell["draws"] == 300
    assert ranking_calibration(seed_runs, ["gym-min"], draws=300) == {"gym-min": cal["gym-min"]}  # seeded


def test_tightness_flags_a_mean_inside_the_range_far_from_the_centre() -> None:
    def q(c_mean: float, s_mean: float, inside: bool) -> dict:  # type: ignore[type-arg]
        return {
            "clt": {"n": 3, "mean": c_mean},
            "seed": {"n": 10, "mean": s_mean, "sd": 1.0, "median": s_mean},
            "cltMeanInsideSeedRange": inside,
        }

    rep = {
        "rows": [
            {"cell": "c", "method": "near", "quantities": {"rd": q(0.1, 0.0, True)}},
            {"cell": "c", "method": "far", "quantities": {"rd": q(1.5, 0.0, True)}},
        ]
    }
    out = tightness(rep)
    sampling = np.sqrt(1 / 3 + 1 / 10)
    # the seed's SD is estimated from its 10 runs: the median |z| under sampling alone is t_0.75(9) x scale
    assert out["perQuantity"]["rd"]["samplingMedianAbsZ"] == pytest.approx(0.7027 * sampling, abs=1e-4)
    assert out["perQuantity"]["rd"]["samplingMedianAbsZ"] == pytest.approx(0.463, abs=1e-3)
    assert [f["method"] for f in out["farInsideRange"]] == ["far"]  # 1.5 > 2 x 0.66; 0.1 is not


def test_tightness_counts_a_value_equal_by_construction_once() -> None:
    def q(c_mean: float) -> dict:  # type: ignore[type-arg]
        return {
            "clt": {"n": 3, "mean": c_mean},
            "seed": {"n": 10, "mean": 0.0, "sd": 1.0, "median": 0.0},
            "cltMeanInsideSeedRange": True,
        }

    shared = [{"cell": "c", "method": m, "quantities": {"taskAFitGain": q(0.4)}} for m in ("a", "b", "c", "d")]
    own = [{"cell": "c", "method": "e", "quantities": {"taskAFitGain": q(0.2)}}]
    out = tightness({"rows": shared + own})
    assert out["perQuantity"]["taskAFitGain"]["n"] == 2  # four methods reading one task-A model count once
    assert out["perQuantity"]["taskAFitGain"]["medianAbsZ"] == pytest.approx(0.3)


def _seeds_per_cell(seed_runs) -> dict[str, int]:
    cells: dict[str, set[int]] = {}
    for (cell, _), runs in seed_runs.items():
        cells.setdefault(cell, set()).update(int(r["seed"]) for r in runs)
    return {c: len(s) for c, s in cells.items()}


def test_the_rho_calibration_with_every_seed_kept_is_the_seed_own_rho(seed_runs) -> None:
    full = rho_calibration(seed_runs, _seeds_per_cell(seed_runs), AXIS, draws=20)
    seed = findings([], seed_runs, AXIS)["spearman"]["seedAllCells"]
    for key in ("level", "dTrans", "taskBDifficulty"):  # every draw keeps every seed: no spread at all
        assert full[key]["low"] == pytest.approx(seed[key]["rho"])
        assert full[key]["high"] == pytest.approx(seed[key]["rho"])
        assert full[key]["draws"] == 20


def test_the_rho_calibration_widens_as_fewer_runs_are_kept(seed_runs) -> None:
    cells = sorted(_seeds_per_cell(seed_runs))
    one = rho_calibration(seed_runs, dict.fromkeys(cells, 1), AXIS, draws=500)
    three = rho_calibration(seed_runs, dict.fromkeys(cells, 3), AXIS, draws=500)
    for key in ("level", "dTrans", "taskBDifficulty"):
        assert one[key]["high"] - one[key]["low"] > three[key]["high"] - three[key]["low"] > 0
    assert three["runsPerCell"] == dict.fromkeys(cells, 3)
    assert rho_calibration(seed_runs, dict.fromkeys(cells, 3), AXIS, draws=500) == three  # seeded
    assert rho_calibration(seed_runs, {"gym-min": 1, "dmc-min": 1}, AXIS) == {}  # fewer than three cells
    assert rho_calibration(seed_runs, {"gym-min": 6, "dmc-min": 1, "gym-med": 1}, AXIS) == {}  # gym-min has 5 seeds
    asked = dict.fromkeys(cells, 1) | {"gym-min": 6}  # eight cells could be calibrated, not the nine clt's rho is over
    assert rho_calibration(seed_runs, asked, AXIS) == {}


def test_the_findings_section_says_whether_clt_rho_is_inside_the_calibrated_range(seed_runs) -> None:
    f = findings([], seed_runs, AXIS)
    f["spearman"]["clt"] = dict(f["spearman"]["seedAllCells"])
    f["spearman"]["seedSameCells"] = f["spearman"]["seedAllCells"]
    f["rhoCalibration"] = rho_calibration(seed_runs, dict.fromkeys(_seeds_per_cell(seed_runs), 3), AXIS, draws=500)
    text = "\n".join(findings_lines(f))
    assert "d_trans: clt's rho +0.58 has the same sign as the seed's +0.58" in text
    assert "inside the 5-95% range of the seed's rho from as many of its own runs per cell" in text
    f["spearman"]["clt"]["level"] = {"rho": 0.9, "p": 0.01, "n": 9, "pKind": "exact"}
    assert "labelled level: clt's rho +0.90 has a different sign from the seed's +0.00" in "\n".join(findings_lines(f))
    assert "+0.90 has a different sign from the seed's +0.00 on these cells (difference +0.90); outside" in "\n".join(
        findings_lines(f)
    )


def test_the_second_finding_is_said_as_ratios_to_finetuning_beside_the_seed() -> None:
    def row(family: str, method: str, clt: tuple[float, float], seed: tuple[float, float] | None) -> dict[str, Any]:
        theirs = {"encoderDrift": None, "pf": None} if seed is None else {"encoderDrift": seed[0], "pf": seed[1]}
        return {"family": family, "method": method, "clt": {"encoderDrift": clt[0], "pf": clt[1]}, "seed": theirs}

    drift = [
        row("minigrid", "finetuning", (900.0, -2.0), (600.0, -4.0)),
        row("minigrid", "ewc", (450.0, 0.5), (660.0, 0.04)),
        row("gym", "finetuning", (1.1, -12.0), None),
        row("gym", "ewc", (1.1, -0.1), None),
    ]
    undefined = {k: {"rho": None, "p": None, "n": 0} for k in ("level", "dTrans", "taskBDifficulty")}
    spearman = {who: undefined for who in ("clt", "seedSameCells", "seedAllCells")}
    text = "\n".join(findings_lines({"spearman": spearman, "axisMethods": AXIS, "drift": drift}))
    assert "- minigrid: fine-tuning's encoder drift 900 (seed 600); EWC's is 0.50 x fine-tuning's " in text
    assert "(seed 1.10 x) while" in text
    assert "while its |PF| is 0.25 of " in text
    assert "fine-tuning's (seed 0.01)" in text
    assert "- gym: not computable" in text


def test_the_first_finding_without_one_family_is_the_seed_rho_over_the_other_cells(seed_runs) -> None:
    from cltoolkit.suites.wmf.reproduction.findings import without_family

    axes = findings([], seed_runs, AXIS)["axis"]
    axes = {"clt": axes["seedAllCells"], "seedSameCells": axes["seedAllCells"]}
    seeds = _seeds_per_cell(seed_runs)
    out = without_family(axes, seed_runs, seeds, AXIS)  # every seed kept: the calibration is the seed's rho
    assert set(out) == {"dmc", "gym", "minigrid"}
    gymless = out["gym"]
    assert sorted(gymless["cells"]) == sorted(c for c in seeds if not c.startswith("gym-"))
    kept = [a for a in axes["clt"] if not a["cell"].startswith("gym-")]
    expected = exact_spearman([a["rd"] for a in kept], [a["dTrans"] for a in kept])
    assert gymless["clt"]["dTrans"]["rho"] == pytest.approx(expected["rho"])
    assert gymless["clt"]["dTrans"]["p"] == pytest.approx(expected["p"])
    assert gymless["rhoCalibration"]["dTrans"]["low"] == pytest.approx(expected["rho"])
    assert gymless["rhoCalibration"]["dTrans"]["high"] == pytest.approx(expected["rho"])
    assert expected["rho"] != pytest.approx(findings([], seed_runs, AXIS)["spearman"]["seedAllCells"]["dTrans"]["rho"])
    f = {"spearman": {k: findings([], seed_runs, AXIS)["spearman"]["seedAllCells"] for k in ("clt", "seedSameCells",
         "seedAllCells")}, "axisMethods": AXIS, "drift": [], "withoutFamily": out}  # fmt: skip
    text = "\n".join(findings_lines(f))
    assert f"| without gym (6 cells) | d_trans | rho {expected['rho']:+.2f}, p {expected['p']:.3f} |" in text
    assert "(clt inside)" in text and "(clt outside)" not in text
    one = {"clt": [a for a in axes["clt"] if a["cell"].startswith("gym-")]}
    assert without_family(one | {"seedSameCells": one["clt"]}, seed_runs, seeds, AXIS) == {}  # one family: nothing


def _axis(rows: Mapping[str, tuple[float, float, float]]) -> list[dict[str, Any]]:
    return [{"cell": c, "level": lv, "rd": rd, "dTrans": d, "taskBDifficulty": None} for c, (lv, rd, d) in rows.items()]


def test_within_family_rho_is_the_mean_of_the_families_and_p_counts_within_family_orders_only() -> None:
    from scipy.stats import spearmanr

    from cltoolkit.suites.wmf.reproduction.findings import within_family_spearman

    rows = {
        "a-min": (1, 1.0, 5.0), "a-med": (2, 3.0, 6.0), "a-max": (3, 2.0, 7.0),
        "b-min": (1, 9.0, 1.0), "b-med": (2, 8.0, 3.0), "b-max": (3, 7.0, 2.0),
        "c-min": (1, 4.0, 2.0), "c-med": (2, 5.0, 1.0), "c-max": (3, 6.0, 3.0),
        "d-min": (1, 100.0, 1.0),  # a family of one cell drops out
    }  # fmt: skip
    out = within_family_spearman(_axis(rows))
    fams = ["a", "b", "c"]
    per = [spearmanr([rows[f"{f}-{lv}"][1] for lv in ("min", "med", "max")], [1, 2, 3]).statistic for f in fams]
    level = out["level"]
    assert (level["families"], level["cells"]) == (3, 9)
    assert level["rho"] == pytest.approx(np.mean(per))
    # p by brute force: every order of the labels within each family, none across families
    stats = []
    for perms in itertools.product(itertools.permutations([1, 2, 3]), repeat=3):
        stats.append(
            np.mean(
                [
                    spearmanr([rows[f"{f}-{lv}"][1] for lv in ("min", "med", "max")], list(p)).statistic
                    for f, p in zip(fams, perms, strict=True)
                ]
            )
        )
    assert level["p"] == pytest.approx(np.mean(np.abs(stats) >= abs(level["rho"]) - 1e-12))
    assert level["pKind"] == "exact, all 216 within-family orders, two-sided"
    assert out["taskBDifficulty"]["rho"] is None  # nothing to rank


def test_within_family_monte_carlo_agrees_with_the_exact_count(monkeypatch) -> None:
    from cltoolkit.suites.wmf.reproduction import findings as mod

    rows = {f"{f}-{lv}": (i + 1, float((i * 7 + k * 3) % 5 + i), float(i + k)) for k, f in enumerate("abc")
            for i, lv in enumerate(("min", "med", "max"))}  # fmt: skip
    exact = mod.within_family_spearman(_axis(rows))["dTrans"]
    monkeypatch.setattr(mod, "EXACT_ORDERS", 10)
    sampled = mod.within_family_spearman(_axis(rows), draws=20_000)["dTrans"]
    assert sampled["pKind"].startswith("Monte Carlo")
    assert sampled["rho"] == exact["rho"]
    assert sampled["p"] == pytest.approx(exact["p"], abs=0.02)


def test_the_seed_first_finding_within_families(seed_runs) -> None:
    wf = findings([], seed_runs, AXIS)["withinFamily"]["seedAllCells"]
    # within each family the seed's own axis RD follows neither label nor d_trans far: rho -0.17 and +0.33
    assert round(wf["level"]["rho"], 2) == -0.17
    assert round(wf["dTrans"]["rho"], 2) == 0.33
    assert round(wf["taskBDifficulty"]["rho"], 2) == 0.67
    assert all(wf[k]["families"] == 3 and wf[k]["cells"] == 9 for k in wf)
    assert wf["dTrans"]["p"] > 0.3  # 120 of 216 within-family orders reach |rho| >= 1/3


def test_the_second_finding_weighs_cells_equally_not_runs() -> None:
    """The seed ran 10 gym-max seeds beside 5 in each other gym cell: a median pooled over runs is gym-max's value
    (its forgetting encoder), while the median over the cells' medians is the middle cell's, as for clt's 3 per cell."""
    from cltoolkit.suites.wmf.reproduction.findings import drift_rows

    def runs(drift: float, n: int) -> list[dict[str, Any]]:
        return [{"encoderDrift": drift + 0.01 * k, "pf": -1.0} for k in range(n)]

    cells = {"gym-min": (0.9, 5), "gym-med": (1.0, 5), "gym-max": (14.0, 10)}
    seed = {(c, m): runs(d, n) for c, (d, n) in cells.items() for m in ("finetuning", "ewc")}
    mine = {(c, m): runs(d, 3) for c, (d, _) in cells.items() for m in ("finetuning", "ewc")}
    mine.pop(("gym-max", "ewc"))  # a cell clt has not run for one method: that method's median over the others
    seed[("minigrid-min", "finetuning")] = runs(500.0, 5)  # a family clt has not run: not shown
    rows = {(r["family"], r["method"]): r for r in drift_rows(mine, seed)}
    assert set(rows) == {("gym", "finetuning"), ("gym", "ewc")}
    ft = rows[("gym", "finetuning")]
    assert ft["cells"] == ["gym-min", "gym-med", "gym-max"]
    assert ft["seed"]["encoderDrift"] == pytest.approx(1.02)  # gym-med's median; pooled over 20 runs: about 7.5
    assert ft["seed"]["runs"] == 20
    assert ft["clt"]["encoderDrift"] == pytest.approx(1.01)
    assert ft["seed"]["perCell"]["gym-max"]["encoderDrift"] == pytest.approx(14.045)
    ewc = rows[("gym", "ewc")]
    assert ewc["clt"]["perCell"]["gym-max"] == {"encoderDrift": None, "pf": None, "runs": 0}
    assert ewc["clt"]["encoderDrift"] == pytest.approx((0.91 + 1.01) / 2)
    undefined = {k: {"rho": None, "p": None, "n": 0} for k in ("level", "dTrans", "taskBDifficulty")}
    spearman = {who: undefined for who in ("clt", "seedSameCells", "seedAllCells")}
    text = "\n".join(findings_lines({"spearman": spearman, "axisMethods": AXIS, "drift": list(rows.values())}))
    per_cell = "gym-min 0.91 / 0.92; gym-med 1.01 / 1.02; gym-max 14 / 14"
    assert f"| gym | finetuning | 1.01 | -1 | 1.02 | -1 | {per_cell} |" in text
