"""The results block: written into a protocol by the gatekeeper only (docs/design.md section 4)."""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

from cltoolkit.protocol._base import Strict

__all__ = [
    "RESULTS_VERSION",
    "BudgetCheck",
    "ClusterLevel",
    "CodeState",
    "GateResult",
    "HypothesisResult",
    "Results",
    "RunCounts",
    "RunSummary",
]

Decision = Literal["pass", "fail", "not-evaluable", "reported"]


class RunCounts(Strict):
    """How many runs the stage planned and what happened to them."""

    planned: int
    """Runs in the planned grid."""
    completed: int
    """Runs with status `completed`."""
    failed: int
    """Runs that raised an exception."""
    crashed: int
    """Runs whose process died."""
    timeout: int
    """Runs stopped at their time limit."""
    missing: int
    """Planned runs with no record."""
    excluded: int
    """Runs excluded by a declared rule (listed in `exclusions`)."""
    redone: int | None = None
    """Runs whose completed record was replaced on purpose (`clt run --redo`; the new record keeps the replaced
    record's seal and the reason). Absent where no run was redone (blocks written before redo existed lack it)."""

    @model_serializer(mode="wrap")
    def _without_unset_redone(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("redone") is None:
            data.pop("redone", None)
        return data


class HypothesisResult(Strict):
    """One tested hypothesis of a gate (one per task for `each-task` gates)."""

    scope: str
    """Task id, or `aggregate`."""
    n: int
    """Replicates used."""
    estimate: float | None
    """The declared aggregate of the replicates: their mean, or their median under `analysis.aggregate: median`
    (one-sample), or of the paired differences (method - reference)."""
    interval: tuple[float | None, float | None] | None
    """Confidence interval or one-sided bound of the estimate (candidate minus reference for paired gates); null
    ends are unbounded; null when the t statistic is undefined. `intervalKind` says which kind it is."""
    intervalKind: Literal["holm-simultaneous", "bonferroni", "marginal"] | None = None
    """`holm-simultaneous`: one-sided bounds compatible with Holm's decisions, simultaneous over the confirmatory
    family (Strassburger & Bretz 2008); `bonferroni`: one-sided bounds at alpha / m, simultaneous; `marginal`: one
    hypothesis alone (exploratory and report-only gates, TOST's 1 - 2 alpha interval)."""
    confidenceLevel: float | None = None
    """Nominal coverage of `interval` (e.g. 0.95 for a one-sided 95% bound, 0.90 for TOST's interval)."""
    confidenceLevelExact: float | None = None
    """Exact coverage where it differs from the nominal one by construction: order-statistic bounds of a median
    (the binomial is discrete: a nominal 95% bound of 9 replicates covers with probability 0.9805)."""
    pValue: float | None
    """Unadjusted p-value of the test that decides the hypothesis (`decidedBy`)."""
    pAdjusted: float | None
    """p-value adjusted over the confirmatory family (Holm / BH)."""
    decidedBy: str | None = None
    """The deciding test: `t-test`, `tost`, or `exact sign-flip` where the t statistic is undefined (zero spread)."""
    permutationP: float | None
    """Sign-flip permutation p of the same hypothesis as the gate (results format 2): one-sided in the claimed
    direction for bound, superiority and non-inferiority gates, the larger one-sided p for equivalence, two-sided
    for report-only. (Format 1: two-sided about the margin, paired gates only.)"""
    permutationMethod: Literal["exact", "monte-carlo"] | None = None
    """`exact`: all 2^n sign flips counted; `monte-carlo`: `permutationDraws` random flips."""
    permutationDraws: int | None = None
    """Monte Carlo draws (null when exact)."""
    permutationSE: float | None = None
    """Monte Carlo standard error of `permutationP` (null when exact)."""
    signTestP: float | None = None
    """Exact sign-test p of the gate's hypothesis: beside the t test for one-sample threshold gates (finite when
    replicates tie); the deciding test (equal to `pValue`) under a median aggregate, paired gates included."""
    wilcoxonP: float | None
    """Wilcoxon signed-rank p of the same hypothesis as the gate (format 2; two-sided in format 1), paired gates."""
    wilcoxonMethod: str | None = None
    """How `wilcoxonP` was computed: `exact`, `exact conditional (ties or zeros)` or `normal approximation` (null in
    blocks reported before it was recorded)."""
    decision: Decision
    """Decision on this hypothesis."""
    reason: str = ""
    """Why it is not evaluable, or what the decision rests on."""
    replicates: dict[str, float] = Field(default_factory=dict)
    """The per-replicate values tested (paired differences for paired gates), by replicate key."""


class GateResult(Strict):
    """The decision on one declared gate."""

    id: str
    """Gate id."""
    label: str
    """Gate statement."""
    test: str
    """Test kind."""
    estimate: float | None
    """Estimate (worst case over tasks for `each-task` gates)."""
    interval: tuple[float | None, float | None] | None
    """Interval of the deciding hypothesis."""
    pValue: float | None
    """Largest unadjusted p over the gate's hypotheses."""
    pAdjusted: float | None
    """Largest adjusted p over the gate's hypotheses."""
    decision: Decision
    """`pass` only when every hypothesis of the gate is rejected in the declared direction."""
    n: int
    """Replicates (smallest over hypotheses)."""
    wording: str
    """How the result may be stated (a report-only comparison is an improvement only when its test rejects)."""
    hypotheses: list[HypothesisResult]
    """Per-hypothesis detail."""
    evaluationSet: str | None = None
    """Evaluation set of the gate's metric."""
    heldOutUnit: str | None = None
    """Held-out unit of that set: what the number generalizes over."""
    oodAxis: list[str] = Field(default_factory=list)
    """Factors varied between training and test on that set (empty: same population)."""


class BudgetCheck(Strict):
    """A declared fairness clause checked from the run ledgers."""

    quantity: str
    """Ledger quantity."""
    across: list[str]
    """Comparison ids."""
    values: dict[str, float | None]
    """Mean ledger value per comparison over completed runs."""
    ok: bool
    """Whether the clause holds."""
    message: str
    """The numbers in words."""


class RunSummary(Strict):
    """One planned run, as the gatekeeper saw it."""

    runId: str
    """Deterministic run id."""
    comparison: str
    """Comparison id."""
    seed: int
    """Training seed."""
    order: str | None
    """Task order id."""
    cell: str | None
    """Grid cell."""
    status: str
    """Record status, or `missing`."""
    excludedBy: str | None = None
    """Exclusion rule id when excluded."""
    scores: dict[str, JsonValue] = Field(default_factory=dict)
    """Raw per-run scores the analysis used."""


RESULTS_VERSION = 2


CodeState = Literal["as frozen", "amended", "differs"]
"""How the code that records carry stands against the code a lock pinned."""


class ClusterLevel(Strict):
    """The gates tested again at the level of the clusters the suite's design makes (replicates that share data,
    models or streams, averaged into one value each), for a protocol that declared no unit of analysis (schema 1).
    Not pre-registered: the protocol's decisions stay `gates`; where one would differ, the report says so first."""

    unit: dict[str, JsonValue]
    """The clusters (`ClusterPlan`: by, cellGroups, shares)."""
    gates: list[GateResult]
    """Every gate decided on the cluster means (n counts clusters)."""
    differs: list[str]
    """Ids of the gates whose cluster-level decision differs from the pre-registered one."""


class Results(Strict):
    """The results block of a protocol."""

    resultsVersion: int = 1
    """Format version: 2 adds the evidence manifest, permutation and Wilcoxon p-values of the gate's own hypothesis,
    interval kinds and levels and the deciding test; a block without it is format 1."""

    protocolSha256: str
    """Hash of the protocol the results belong to."""
    canonicalization: str
    """Canonicalization id of that hash."""
    measuredOn: datetime.datetime
    """When the gatekeeper computed this block (UTC)."""
    toolkitVersion: str
    """Version of the gatekeeper that computed it."""
    stage: str
    """Stage reported."""
    runs: RunCounts
    """Run counts."""
    gates: list[GateResult]
    """Gate decisions."""
    budgetChecks: list[BudgetCheck]
    """Fairness clauses checked from the ledgers."""
    perRun: list[RunSummary]
    """Every planned run with its status and raw scores; nothing dropped."""
    summaries: dict[str, JsonValue]
    """The suite's own summaries (per-task immediate and final values, ranks, ...)."""
    exclusions: list[dict[str, JsonValue]]
    """Exclusions applied, each with the affected gates' decisions with and without it."""
    resourceCosts: dict[str, JsonValue]
    """Summed ledgers and wall-clock per comparison, measured vs analytical kept apart."""
    toolkitVersions: list[str]
    """Toolkit versions that produced the records."""
    reports: list[str]
    """Paths of the human-readable reports written beside this block."""
    evidence: dict[str, str] = Field(default_factory=dict)
    """The evidence manifest: run id -> seal (`sha256:...`) of every record this block was computed from.
    `clt report --check` recomputes the block from the records in place and fails on any difference."""
    mixedComponentCode: list[str] = Field(default_factory=list)
    """Comparisons whose records came from different component code (only when reported with
    `--allow-mixed-code`; otherwise such a report is refused). Shown in red in the report."""
    clusterLevel: ClusterLevel | None = None
    """The gates at the cluster level of the suite's design, not pre-registered (a protocol without a declared unit
    of analysis whose replicates share data or streams); absent otherwise."""
    componentCode: dict[str, CodeState] = Field(default_factory=dict)
    """`<kind>:<name>` -> how the code the records carry stands against the code the lock pinned: as frozen,
    amended (a dated code amendment in `status.codeAmendments` covers it) or differs (only with
    `--allow-mixed-code`). Empty when the lock pins no code (frozen before the evaluator was pinned)."""

    @model_serializer(mode="wrap")
    def _without_absent_cluster_level(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("clusterLevel") is None:
            data.pop("clusterLevel", None)
        return data
