"""The `sessions` suite: held-out sessions vs a random transition split vs a shifted cohort (seed 003)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cltoolkit.components import Suite, make_method
from cltoolkit.errors import Problem
from cltoolkit.suites.sessions.methods import SessionModel, SessionsTaskEnd, SessionsTaskStart
from cltoolkit.suites.sessions.models import SessionsProtocol

if TYPE_CHECKING:
    import numpy as np

    from cltoolkit.run.spec import RunOutput, RunSpec
    from cltoolkit.splits import SplitManifest
    from cltoolkit.suites.sessions.data import Rows

__all__ = ["SessionsSuite", "set_metrics"]

_UNITS = {"groupedSet": "session", "randomSet": "transition", "shiftedSet": "session"}


def set_metrics(protocol: SessionsProtocol) -> dict[str, str]:
    """Evaluation set id -> the declared metric measured on it."""
    return {m.evaluationSet: m.id for m in protocol.metrics if m.evaluationSet is not None}


class SessionsSuite(Suite[SessionsProtocol]):
    """Held-out sessions toy of the experimental-design chapter."""

    name = "sessions"
    method_base = SessionModel
    protocol_model = SessionsProtocol
    analysis = "sessions"
    summary = "held-out sessions vs random transition split vs shifted cohort (seed 003)"

    def check(self, protocol: SessionsProtocol) -> Iterator[Problem]:
        sets = {e.id: e for e in protocol.evaluationSets}
        measured = set_metrics(protocol)
        for field, unit in _UNITS.items():
            set_id = getattr(protocol.splits, field)
            where = f"/splits/{field}"
            if set_id not in sets:
                yield Problem(where, f"evaluation set {set_id!r} is not declared in evaluationSets")
                continue
            if sets[set_id].heldOutUnit != unit:
                yield Problem(
                    where, f"evaluation set {set_id!r} must hold out {unit!r}, declares {sets[set_id].heldOutUnit!r}"
                )
            if set_id not in measured:
                yield Problem(where, f"no declared metric is measured on evaluation set {set_id!r}")
        if protocol.splits.shiftedSet in sets and not sets[protocol.splits.shiftedSet].varies:
            yield Problem("/splits/shiftedSet", "the shifted-cohort set must name what varies (its OOD axis)")
        for i, comp in enumerate(protocol.comparisons):
            window = comp.hyperparameters.get("window")
            if isinstance(window, int) and window > protocol.featureWindow:
                yield Problem(
                    f"/comparisons/{i}/hyperparameters/window", f"exceeds featureWindow {protocol.featureWindow}"
                )

    def execute(self, protocol: SessionsProtocol, spec: RunSpec, workdir: Path) -> RunOutput:
        """Simulate fresh cohorts (streams depend on the seed only, so every method sees identical data and rows),
        split them three ways, fit the comparison's model per split and score it."""
        import numpy as np

        from cltoolkit.errors import CheckFailed
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.splits import SplitManifest, check_grouped, grouped_split, random_row_split
        from cltoolkit.suites.sessions.data import simulate

        comp = protocol.comparison(spec.comparison)
        regs = self.project_regs()
        streams = [np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(4)]
        main = simulate(protocol, protocol.cohort("main"), streams[0])
        shifted = simulate(protocol, protocol.cohort("shifted"), streams[1])
        g_train, g_test, g_manifest = grouped_split(
            main.session.tolist(), protocol.splits.groupedTestSessions, streams[2], unit="session"
        )
        crossing = check_grouped(main.session.tolist(), g_train.tolist(), g_test.tolist())
        if crossing:
            raise CheckFailed(f"grouped split crosses sessions {', '.join(crossing)}")
        r_train, r_test, r_manifest = random_row_split(
            len(main), protocol.splits.randomTestFraction, streams[3], keys=main.session.tolist()
        )
        s_manifest = SplitManifest(
            "cohort",
            "session",
            g_manifest.train,
            tuple(f"shifted:{j}" for j in range(protocol.cohort("shifted").sessions)),
            g_manifest.train_rows,
            len(shifted),
            g_manifest.train_units,
            protocol.cohort("shifted").sessions,
        )
        measured = set_metrics(protocol)
        grouped_model = make_method(SessionModel, comp.method, comp.hyperparameters, regs)
        random_model = make_method(SessionModel, comp.method, comp.hyperparameters, regs)
        evaluations: dict[str, Any] = {}
        splits: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        queries = 0
        for set_id, model, train, rows, test, manifest in (
            (protocol.splits.groupedSet, grouped_model, g_train, main, g_test, g_manifest),
            (protocol.splits.randomSet, random_model, r_train, main, r_test, r_manifest),
            (protocol.splits.shiftedSet, grouped_model, g_train, shifted, np.arange(len(shifted)), s_manifest),
        ):
            if set_id != protocol.splits.shiftedSet:
                model.begin_task(SessionsTaskStart(set_id, 0, int(train.size)))
                model.fit(main, train)
                model.end_task(SessionsTaskEnd(set_id, 0, True))
                for step in model.preprocessing():
                    step.check(train)  # learned preprocessing saw training rows only
            evaluations[set_id] = _score(model, rows, test, manifest)
            splits[set_id] = manifest.as_dict()
            metrics[measured[set_id]] = evaluations[set_id]["mae"]
            queries += int(test.size)
        metrics["evaluations"] = evaluations
        diagnostics = {
            f"{name}.{key}": value
            for name, model in (("grouped", grouped_model), ("random", random_model))
            for key, value in model.diagnostics().items()
        }
        if diagnostics:  # the method's own numbers, for the record and the report's table
            metrics["methodDiagnostics"] = diagnostics
        metrics["sessionEffects"] = {
            "main": main.effects.round(6).tolist(),
            "shifted": shifted.effects.round(6).tolist(),
        }
        steps = protocol.sessionLength * sum(c.sessions for c in protocol.cohorts)
        return RunOutput(
            metrics=metrics,
            budget={"environmentSteps": steps, "modelQueries": queries},
            precision="float64",
            splits=splits,
        )


def _score(model: SessionModel[Any], rows: Rows, test: np.ndarray, manifest: SplitManifest) -> dict[str, Any]:
    import numpy as np

    err = np.abs(model.predict(rows, test) - rows.target[test])
    sessions = rows.session[test]
    per_session = {str(j): round(float(err[sessions == j].mean()), 8) for j in np.unique(sessions)}
    return {
        "mae": float(err.mean()),
        "manifestSha256": manifest.sha256,
        "testSessions": len(per_session),
        "perSessionMae": per_session,
    }
