"""Split cells in the seed's stored runs (`cltoolkit.suites.wmf.reproduction.modes`)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cltoolkit.suites.wmf.reproduction.modes import (
    LEVEL,
    critical_value,
    fit_location,
    fit_location_lines,
    fit_mode_lines,
    fit_modes,
    gap_statistic,
    split_cells,
    split_lines,
)
from cltoolkit.suites.wmf.reproduction.reference import load_reference

ROOT = Path(__file__).resolve().parents[2]


def _record(cell: str, method: str, seed: int, **metrics: float) -> Any:
    return SimpleNamespace(
        status=SimpleNamespace(state="completed"),
        spec=SimpleNamespace(cell=cell, comparison=method, seed=seed),
        metrics=metrics,
    )


def _gap(values: Any) -> tuple[float, int]:
    out = gap_statistic(values)
    assert out is not None
    return out


def test_the_gap_statistic_by_hand() -> None:
    t, lower = _gap([0.0, 1.0, 2.0, 10.0, 11.0])
    # largest gap 2 -> 10 (8); groups [0, 1, 2] (SS 2) and [10, 11] (SS 0.5); pooled SD sqrt(2.5 / 3)
    assert lower == 3
    assert t == pytest.approx(8 / math.sqrt(2.5 / 3))
    assert gap_statistic([1.0, 2.0, 3.0]) is None  # too few to split
    assert gap_statistic([4.0] * 6) is None  # no spread
    assert _gap([0.0, 0.0, 0.0, 5.0, 5.0])[0] == math.inf  # two constant groups


def test_the_critical_value_holds_its_level_on_fresh_normal_samples() -> None:
    rng = np.random.default_rng(2024)  # not the seeds critical_value draws with
    for n in (5, 10):
        c = critical_value(n)
        assert c == critical_value(n)  # seeded: the same every call
        hits = np.mean([_gap(rng.standard_normal(n))[0] > c for _ in range(4000)])
        assert 0.4 * LEVEL < hits < 2.0 * LEVEL
    assert critical_value(5) > critical_value(10)  # fewer runs: a gap needs to be larger to count


def test_a_lone_far_seed_run_is_a_split_and_three_runs_mostly_miss_it() -> None:
    rng = np.random.default_rng(7)
    body = list(10 + rng.standard_normal(9))
    values, noise = [*body, 60.0], rng.standard_normal(10)
    reference = {
        ("dmc-med", "finetuning"): [{"rd": v, "pf": v} for v in values],
        ("dmc-med", "ewc"): [{"rd": v, "pf": float(p)} for v, p in zip(values, noise, strict=True)],
    }
    records = [
        _record("dmc-med", "finetuning", 0, rd=10.0, pf=10.0),
        _record("dmc-med", "finetuning", 1, rd=59.0, pf=59.0),
        _record("dmc-med", "finetuning", 2, rd=9.0, pf=9.0),
        _record("dmc-med", "ewc", 0, rd=11.0, pf=0.1),
    ]
    rep = split_cells(records, reference)
    by = {(s["quantity"], tuple(s["methods"])): s for s in rep["splits"]}
    # the same ten rd values in both methods form one entry; ewc's normal pf is no split
    assert set(by) == {("pf", ("finetuning",)), ("rd", ("ewc", "finetuning"))}
    s = by[("rd", ("ewc", "finetuning"))]
    assert (s["lower"]["n"], s["upper"]["n"], s["minority"], s["minorityShare"]) == (9, 1, "upper", 0.1)
    assert s["missedByThreeRuns"] == pytest.approx(84 / 120)  # C(9, 3) / C(10, 3)
    assert s["shiftPerRun"] == pytest.approx((60.0 - np.mean(body)) / 3)
    assert s["clt"] == {"n": 1, "minority": 0}  # read from the first method's records: ewc's one run
    assert by[("pf", ("finetuning",))]["clt"] == {"n": 3, "minority": 1}
    from scipy.stats import fisher_exact

    assert by[("pf", ("finetuning",))]["fisherP"] == pytest.approx(fisher_exact([[1, 2], [1, 9]]).pvalue)
    text = "\n".join(split_lines(rep))
    assert "| dmc-med | pf | finetuning | 9, " in text and "| 1 of 3 |" in text


def test_cells_clt_did_not_run_are_not_tested() -> None:
    reference = {("gym-min", "ewc"): [{"rd": v} for v in [1.0, 1.1, 1.2, 1.3, 50.0]]}
    assert split_cells([], reference)["tested"] == 0
    assert split_lines(split_cells([], reference))[-1] == "No split cell."


def test_the_seed_dm_control_encoder_drift_has_a_lone_high_run() -> None:
    seed_runs = load_reference(ROOT / "reference" / "wmf-seed000-metrics.json")
    records = [_record("dmc-max", "finetuning", s, encoderDrift=16.0) for s in range(3)]
    splits = {s["quantity"]: s for s in split_cells(records, seed_runs)["splits"]}
    drift = splits["encoderDrift"]
    assert (drift["lower"]["n"], drift["upper"]["n"]) == (9, 1)
    assert drift["upper"]["mean"] > 3 * drift["lower"]["mean"]
    assert drift["clt"] == {"n": 3, "minority": 0}


def _seed_run(seed: int, a: float, b: float, drift: float = 1.5) -> dict[str, Any]:
    return {
        "seed": seed,
        "heldout_reconstruction_A_after_task_A": a,
        "heldout_reconstruction_A_after_task_B": a * drift,
        "heldout_reconstruction_B_after_task_B": b,
    }


def test_fit_modes_pool_a_cells_methods_one_value_per_model() -> None:
    rng = np.random.default_rng(3)
    plateau = list(15 + 0.5 * rng.standard_normal(10))
    reference = {
        # the plain methods share each seed's task-A model (15 on the plateau, seed 4 off it at 4.5)
        ("dmc-min", "finetuning"): [_seed_run(s, 4.5 if s == 4 else 15.0, plateau[s]) for s in range(5)],
        ("dmc-min", "ewc"): [_seed_run(s, 4.5 if s == 4 else 15.0, plateau[5 + s]) for s in range(5)],
        # a frozen encoder (drift exactly 1): its B value is not a fit of B and stays out
        ("dmc-min", "ug-mtm"): [_seed_run(s, 15.05 + s / 10, 300.0 + s, drift=1.0) for s in range(5)],
    }
    records = [
        _record("dmc-min", "finetuning", s, reconAAfterA=6.0 + s / 5, reconBAfterB=5.0 + s, encoderDrift=0.5)
        for s in range(3)
    ] + [
        _record("dmc-min", "ewc", 0, reconAAfterA=6.0, reconBAfterB=5.5, encoderDrift=0.5),  # finetuning's model
        _record("dmc-min", "ug-mtm", 0, reconAAfterA=6.5, reconBAfterB=400.0, encoderDrift=1.0),
    ]
    rep = fit_modes(records, reference)
    by = {s["quantity"]: s for s in rep["splits"]}
    assert set(by) == {"reconAAfterA"}  # ten plateau B fits (UG-MTM's 300s left out) are one group
    a = by["reconAAfterA"]
    # 5 plain task-A models (4 on the plateau, one off) + 5 UG-MTM models, each counted once
    assert a["seedModels"] == 10 and (a["lower"]["n"], a["upper"]["n"]) == (1, 9)
    assert a["clt"] == {"n": 4, "lower": 4, "values": [6.0, 6.2, 6.4, 6.5]}  # ewc's seed-0 model counted once
    from scipy.stats import fisher_exact

    assert a["fisherP"] == pytest.approx(fisher_exact([[4, 0], [1, 9]]).pvalue)
    text = "\n".join(fit_mode_lines(rep))
    assert "| dmc-min | reconAAfterA | 1, 4.5 [4.5, 4.5] / 9, " in text and "| 4 of 4 | 6, 6.2, 6.4, 6.5 |" in text


def test_the_seed_dmc_min_b_fits_sit_on_the_plateau_but_one() -> None:
    seed_runs = load_reference(ROOT / "reference" / "wmf-seed000-metrics.json")
    records = [_record("dmc-min", "finetuning", s, reconBAfterB=5.2, encoderDrift=0.4) for s in range(2)]
    by = {s["quantity"]: s for s in fit_modes(records, seed_runs)["splits"]}
    b = by["reconBAfterB"]
    # the four plain methods' 20 final models: 19 near 15, progressive nets' seed 1 at 5.2 (UG-MTM's frozen ones out)
    assert (b["lower"]["n"], b["upper"]["n"]) == (1, 19)
    assert b["upper"]["min"] > 2 * b["lower"]["max"]
    assert b["clt"]["lower"] == 2
    assert fit_mode_lines({"level": LEVEL, "tested": 0, "splits": []})[-1] == "No cell's models fall in two groups."


def test_fit_location_counts_each_model_once_against_the_same_methods_seed_models() -> None:
    reference = {
        # task-A models shared by the plain methods (one per seed), B fits one per run
        ("dmc-med", "finetuning"): [_seed_run(s, 14.0 + s / 10, 30.0 + s) for s in range(5)],
        ("dmc-med", "ewc"): [_seed_run(s, 14.0 + s / 10, 32.0 + s) for s in range(5)],
        # a frozen encoder: its B value stays out, its task-A models are its own
        ("dmc-med", "ug-mtm"): [_seed_run(s, 20.0 + s, 300.0, drift=1.0) for s in range(5)],
    }
    records = [
        _record("dmc-med", "finetuning", 0, reconAAfterA=14.2, reconBAfterB=40.0, encoderDrift=2.0),
        _record("dmc-med", "ewc", 0, reconAAfterA=14.2, reconBAfterB=33.0, encoderDrift=2.0),  # the same task-A model
        _record("dmc-med", "finetuning", 1, reconAAfterA=9.0, reconBAfterB=41.0, encoderDrift=2.0),
        _record("dmc-med", "ug-mtm", 1, reconAAfterA=21.0, reconBAfterB=500.0, encoderDrift=1.0),
    ]
    rows = {r["quantity"]: r for r in fit_location(records, reference)["rows"]}
    a = rows["reconAAfterA"]
    # 14.2 inside the plain methods' five (14.0-14.4), 9.0 below; UG-MTM's 21.0 inside its own 20-24
    assert (a["below"], a["inside"], a["above"], a["compared"]) == (1, 2, 0, 3)
    assert a["seed"]["n"] == 10 and a["clt"]["n"] == 3
    assert a["bySeed"] == [
        {"seed": 0, "below": 0, "inside": 1, "above": 0},
        {"seed": 1, "below": 1, "inside": 1, "above": 0},
    ]
    # the plain task-A model is compared with 5 seed models, UG-MTM's with its 5: 3 x 2/6
    assert a["outsideByChance"] == pytest.approx(1.0)
    b = rows["reconBAfterB"]
    # finetuning's 40 and 41 above its 30-34; ewc's 33 inside its 32-36; the frozen encoders left out on both sides
    assert (b["below"], b["inside"], b["above"]) == (0, 1, 2) and b["seed"]["n"] == 10
    assert "reconBFromScratch" not in rows  # no run records it
    text = "\n".join(fit_location_lines(fit_location(records, reference)))
    assert "| dmc-med | reconBAfterB | 10, " in text and "| 0 / 1 / 2 of 3 | 1.0 | 0: 0/1/1, 1: 0/0/1 |" in text
    assert fit_location_lines({"rows": []})[-1] == "No model to compare."


def test_fit_location_finds_dmc_med_b_fits_above_all_the_seed_s() -> None:
    seed_runs = load_reference(ROOT / "reference" / "wmf-seed000-metrics.json")
    records = [_record("dmc-med", "finetuning", s, reconBAfterB=v, encoderDrift=2.0) for s, v in ((0, 35.0), (1, 99.0))]
    (b,) = [r for r in fit_location(records, seed_runs)["rows"] if r["quantity"] == "reconBAfterB"]
    # the seed's dm_control med B fits of the four plain methods (ten seeds each; UG-MTM's frozen encoders out)
    assert b["seed"]["n"] == 40 and 29 < b["seed"]["min"] < 30 and b["seed"]["max"] < 46
    # 35 inside finetuning's ten (30.9-41.3), 99 above them
    assert (b["below"], b["inside"], b["above"]) == (0, 1, 1)
    assert b["outsideByChance"] == pytest.approx(2 * 2 / 11)  # each compared with finetuning's ten
