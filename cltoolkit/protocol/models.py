"""The protocol envelope (docs/design.md section 2). Suites subclass `ProtocolBase` to add their typed sections
(`environment`, `tasks`, `families`, ...) and fix `suite` to a literal.

One module for the envelope's schema (`schemas/protocol.schema.json` is generated from it), whose cross-field checks
(gates against comparisons, stages against seeds, claims against evaluation sets) read neighbouring models; the
analysis plan, which checks only itself, is `protocol.analysis_plan` (re-exported here)."""

from __future__ import annotations

import datetime
import itertools
from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from cltoolkit.ids import ID_PATTERN
from cltoolkit.protocol._base import SeedValue, Slug, Strict
from cltoolkit.protocol.analysis_plan import (
    AnalysisPlan,
    ClusterPlan,
    ExclusionRule,
    PermutationPlan,
)
from cltoolkit.protocol.results import Results

__all__ = [
    "SCHEMA_VERSION",
    "UNDECLARED_EXEMPT",
    "AnalysisPlan",
    "Budget",
    "BudgetMatch",
    "Claim",
    "ClusterPlan",
    "CodeAmendment",
    "Comparison",
    "DeclaredChange",
    "Erratum",
    "EvaluationSet",
    "ExclusionRule",
    "Gate",
    "MetricDecl",
    "Milestone",
    "MilestoneState",
    "PackageStack",
    "PermutationPlan",
    "ProtocolBase",
    "Safeguard",
    "SeedPlan",
    "SeedRange",
    "SeedValue",
    "Stage",
    "Status",
    "TaskOrder",
    "TestKind",
    "covering_change",
]

SCHEMA_VERSION = 2
"""The newest document format: 2 adds `analysis.clusters` (the unit of analysis) and requires it where a gate pools
replicates that share data or models; documents of format 1 keep validating as they were frozen."""

TestKind = Literal["lower-bound", "upper-bound", "superiority", "non-inferiority", "equivalence-tost", "report-only"]
Comparator = Literal[">=", "<=", ">", "<", "within"]
LedgerQuantity = Literal[
    "environmentSteps",
    "frames",
    "gradientUpdates",
    "replayUpdates",
    "replaySamples",
    "modelQueries",
    "samplesProcessed",
    "totalUpdates",
]


def _article(word: str) -> str:
    """`an` before a vowel sound (an equivalence-tost gate, an upper-bound gate), else `a`."""
    return "an" if word[:1].lower() in "aeiou" else "a"


class Comparison(Strict):
    """One method run under the protocol, with every hyperparameter it uses."""

    id: Slug
    """Local id used by gates, budget clauses and run ids (e.g. `sequential`)."""
    method: str
    """Registered method name (see `clt list method`)."""
    role: Literal["baseline", "candidate", "reference"]
    """`baseline` and `candidate` are the main comparisons; `reference` marks methods with other data-access
    assumptions (joint training, specialists) or diagnostics, reported separately."""
    label: str
    """Human-readable name."""
    description: str = ""
    """What the comparison is and why it is here."""
    diagnostic: Literal["privileged", "trivial"] | None = None
    """For reference diagnostics: `privileged` (uses information a deployment lacks, e.g. true dynamics) or
    `trivial` (e.g. a zero-action controller). Never presented as a competitor."""
    hyperparameters: dict[str, JsonValue] = Field(default_factory=dict)
    """Every hyperparameter of the method, as the method's registered parameter model validates them."""


class BudgetMatch(Strict):
    """A fairness clause: a ledger quantity that must match across comparisons."""

    quantity: LedgerQuantity
    """Run-ledger quantity (`totalUpdates` = gradient updates + replay updates)."""
    across: list[Slug] = Field(min_length=2)
    """Comparison ids that must match."""
    relativeTolerance: float = Field(default=0.0, ge=0.0, le=1.0)
    """Allowed relative difference (0 = exact)."""


class Budget(Strict):
    """The declared compute budget and which parts of it must match across comparisons."""

    interactionsPerTask: int | None = Field(default=None, ge=1, le=10**10)
    """Environment interactions per task phase (null where the suite has no environment interaction)."""
    gradientUpdatesPerTask: int | None = Field(default=None, ge=0, le=10**9)
    """Gradient updates per task phase, where the protocol fixes them: a phase that would take more optimiser steps
    is a budget violation."""
    memoryCapacity: int | None = Field(default=None, ge=0, le=10**9)
    """Replay memory capacity in transitions, where a comparison has one: a suite memory larger than this is a
    budget violation (nav4: `learner.new_memory`; wmf: the transitions of the earlier tasks' training sets a method
    replays)."""
    unaccountedSamples: Literal["violation", "replay"] = "violation"
    """Samples that reach the model with gradients inside an update and are neither the update's own data nor drawn
    from the suite's memory (a method's private buffer): `violation` fails the run, naming the update; `replay`
    charges them as replayed samples (and their share of the step as a replay update)."""
    fairness: str = ""
    """The fairness clause in words."""
    match: list[BudgetMatch] = Field(default_factory=list)
    """Machine-checked fairness clauses, checked by the gatekeeper from the run ledgers."""
    references: str = ""
    """How references with other data-access assumptions are treated."""


class MetricDecl(Strict):
    """A metric the protocol reports: a registered, versioned metric id."""

    id: Annotated[str, Field(pattern=ID_PATTERN)]
    """Registered metric id, versioned (`<name>-v<N>`)."""
    label: str
    """Human-readable name."""
    kind: Literal["gate", "reporting", "diagnostic"] = "reporting"
    """Whether gates are declared on it, or it is reported only."""
    target: str = ""
    """The proposed target in words (the machine-readable claim is a gate)."""
    description: str = ""
    """How it is computed, in words."""
    evaluationSet: Slug | None = None
    """Id of the evaluation set (held-out unit, OOD axis) the metric is measured on."""


class EvaluationSet(Strict):
    """An evaluation set: what is held out from training, and what (if anything) varies between training and test."""

    id: Slug
    """Evaluation-set id, referenced by metrics."""
    label: str
    """Human-readable name."""
    heldOutUnit: str
    """The independent unit held out from training (transition, episode, session, layout seed, task,
    embodiment...); claims are checked against it."""
    varies: list[str] = Field(default_factory=list)
    """Factors whose population differs between training and test (the OOD axis); empty: new units drawn from
    the training population."""
    estimand: str
    """What a number measured on this set estimates, in words (e.g. `transfer to new sessions, same regime`)."""
    description: str = ""
    """How the set is built."""


class Gate(Strict):
    """A machine-readable claim: metric, scope, comparator, threshold, reference and the test that decides it."""

    id: Slug
    """Gate id."""
    label: str
    """Human-readable statement."""
    metric: str
    """Metric id, one of the protocol's `metrics`."""
    method: Slug
    """Comparison id the claim is about."""
    reference: Slug | None = None
    """Comparison id compared against (paired by replicate); null for one-sample threshold gates."""
    scope: Literal["each-task", "aggregate"] = "aggregate"
    """`each-task`: one hypothesis per task (all must pass); `aggregate`: one hypothesis on the suite's aggregate."""
    test: TestKind
    """How the claim is decided."""
    comparator: Comparator
    """Direction of the claim: `>=`/`>` (at least), `<=`/`<` (at most), `within` (equivalence)."""
    threshold: float | None = None
    """Threshold for one-sample gates, in `unit`."""
    margin: float | None = Field(default=None, ge=0.0)
    """Margin for paired gates: superiority by more than +margin, non-inferiority above -margin, equivalence
    within +-margin."""
    unit: str
    """Unit of threshold and margin (e.g. `fraction`, `MSE`)."""
    confirmatory: bool = True
    """Part of the confirmatory family that the multiplicity correction covers."""
    delta: float | None = Field(default=None, gt=0.0)
    """Planning: the smallest effect worth detecting beyond the threshold / margin (in `unit`)."""
    planningSd: float | None = Field(default=None, gt=0.0)
    """Planning: the assumed SD of the per-replicate values (paired differences for paired gates)."""
    planningSource: str = ""
    """Where `planningSd` comes from (pilot runs, earlier study, guess), in words."""

    @property
    def lower_is_better(self) -> bool:
        """Whether the claim is that the value (or difference) is low: `<=` / `<` comparators."""
        return self.comparator in ("<=", "<")

    @model_validator(mode="after")
    def _consistent(self) -> Gate:
        one_sample = self.test in ("lower-bound", "upper-bound")
        if one_sample and (self.threshold is None or self.reference is not None):
            raise ValueError(f"{_article(self.test)} {self.test} gate needs a threshold and no reference")
        if self.test in ("superiority", "non-inferiority", "equivalence-tost"):
            if self.reference is None or self.margin is None:
                raise ValueError(f"{_article(self.test)} {self.test} gate needs a reference and a margin")
        expected = {
            "lower-bound": (">=", ">"),
            "upper-bound": ("<=", "<"),
            "superiority": (">=", ">", "<=", "<"),
            "non-inferiority": (">=", ">", "<=", "<"),
            "equivalence-tost": ("within",),
        }.get(self.test)
        if expected is not None and self.comparator not in expected:
            raise ValueError(
                f"{_article(self.test)} {self.test} gate needs comparator {' or '.join(expected)}, got "
                f"{self.comparator!r}"
            )
        if self.test == "report-only" and self.confirmatory:
            raise ValueError("a report-only gate cannot be confirmatory")
        return self


class SeedRange(Strict):
    """A half-open range of generator seeds [start, stop)."""

    start: int = Field(ge=0)
    """First seed."""
    stop: int
    """One past the last seed."""

    @model_validator(mode="after")
    def _ordered(self) -> SeedRange:
        if self.stop <= self.start:
            raise ValueError(f"empty seed range [{self.start}, {self.stop})")
        return self


class TaskOrder(Strict):
    """A predeclared order of tasks."""

    id: Slug
    """Order id."""
    tasks: list[str] = Field(min_length=1)
    """Task ids in training order."""


class Stage(Strict):
    """An evaluation stage: which training seeds and task orders it runs."""

    id: Slug
    """Stage id (e.g. `preliminary`, `validation`)."""
    seeds: list[SeedValue] = Field(min_length=1)
    """Training seeds (0 to 2^31 - 1)."""
    orders: list[Slug] = Field(default_factory=list)
    """Task order ids (empty where the suite has no task order)."""
    cells: list[str] = Field(default_factory=list)
    """Cells the stage runs (suites with cells, e.g. wmf's `minigrid-min`); empty: every cell."""
    comparisons: list[Slug] = Field(default_factory=list)
    """Comparison ids the stage runs; empty: every comparison. A stage that confirms a few gates at many seeds
    runs the gates' comparisons alone, while another stage runs the whole table at fewer seeds; stages that share a
    (comparison, seed) share its run."""
    description: str = ""
    """What the stage is for."""
    purpose: Literal["confirmatory", "pilot", "exploratory"] = "confirmatory"
    """`pilot` stages feed planning (`clt plan power --from-pilot`) and are run with `--pilot`; the power check at
    freeze covers `confirmatory` stages."""


class SeedPlan(Strict):
    """Generator seed ranges per split, training seeds per stage, task orders."""

    splits: dict[str, SeedRange] = Field(default_factory=dict)
    """Generator seed ranges per split (`train`, `validation`, `test`); must be disjoint."""
    taskOrders: list[TaskOrder] = Field(default_factory=list)
    """Predeclared task orders."""
    stages: list[Stage] = Field(min_length=1)
    """Stages in the order they run; the first is the default of `clt run`."""
    description: str = ""
    """The seed plan in words."""

    @model_validator(mode="after")
    def _disjoint(self) -> SeedPlan:
        items = sorted(self.splits.items(), key=lambda kv: kv[1].start)
        for (a, ra), (b, rb) in itertools.pairwise(items):
            if rb.start < ra.stop:
                raise ValueError(f"seed ranges of splits {a!r} and {b!r} overlap")
        orders = {o.id for o in self.taskOrders}
        for stage in self.stages:
            for order in stage.orders:
                if order not in orders:
                    raise ValueError(f"stage {stage.id!r} names unknown task order {order!r}")
        ids = [s.id for s in self.stages]
        if len(ids) != len(set(ids)):
            raise ValueError("stage ids must be unique")
        return self


class Safeguard(Strict):
    """A safeguard: declared text, and the registered machine check where one exists."""

    id: Slug
    """Safeguard id."""
    text: str
    """The safeguard in words."""
    check: str | None = None
    """Name of the suite's freeze-time check that enforces it (null: declared only)."""


class DeclaredChange(Strict):
    """A change from the protocol this version supersedes, and why."""

    pointers: list[Annotated[str, Field(pattern=r"^/")]] = Field(min_length=1)
    """JSON pointers it covers (a pointer covers everything under it)."""
    reason: str = Field(min_length=1)
    """Why, and its expected effect."""


UNDECLARED_EXEMPT = ("id", "status", "results", "supersedes", "changes", "$schema")
"""Top-level fields a new version changes without declaring it."""


def covering_change(pointer: str, changes: list[DeclaredChange]) -> int | None:
    """Index of the declared change that covers `pointer` (equal to or under one of its pointers), else None; the
    exempt top-level fields are covered by -1."""
    if pointer.split("/")[1] in UNDECLARED_EXEMPT:
        return -1
    for i, change in enumerate(changes):
        if any(pointer == p or pointer.startswith(p.rstrip("/") + "/") for p in change.pointers):
            return i
    return None


class Claim(Strict):
    """A claim the protocol supports, and the held-out unit it rests on."""

    id: Slug
    """Claim id."""
    text: str
    """The claim in words."""
    heldOutUnit: str
    """The unit the claim generalizes over (episode, layout seed, session, task...)."""


class Milestone(Strict):
    """A declared milestone."""

    id: Slug
    """Milestone id."""
    title: str
    """What it is."""
    note: str = ""
    """Details."""


class MilestoneState(Strict):
    """Mutable state of a milestone (in `status`, outside the hash)."""

    state: Literal["planning", "planned", "in-progress", "done", "blocked"]
    """Where it stands."""
    completedOn: datetime.date | None = None
    """Completion date."""
    note: str = ""
    """Details."""


class Erratum(Strict):
    """A difference from the protocol's reference (a seed's text or code) found after freezing. The hashed
    disclosures cannot change, so it is recorded here, dated, and every report prints it as *not* pre-registered;
    the next version declares or removes it."""

    found: datetime.date
    """When it was found (after the freeze)."""
    text: str = Field(min_length=1)
    """The difference, its reason where known, and its expected effect on the results."""
    where: str = ""
    """Where the reference shows it (file and lines, commit)."""


class CodeAmendment(Strict):
    """A change of a pinned component's code after freezing, recorded (dated, with its reason) so that runs of the
    new code are accepted. Outside the hash and append-only like errata; every report prints it first, as not
    pre-registered."""

    on: datetime.date
    """When the amendment was recorded."""
    component: str = Field(pattern=r"^(suite|method|metric|analysis|evaluator):.+$")
    """`<kind>:<name>` of the component whose code changed."""
    sourceSha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """The digest of the amended code that runs may now carry (beside the lock's)."""
    reason: str = Field(min_length=1)
    """Why the code changed, and its expected effect on the results."""


class Status(Strict):
    """Mutable status, outside the hash; written by people while drafting and by the gatekeeper after."""

    stage: Literal["planning", "draft", "pilot", "frozen", "running", "reported"]
    """Where the evaluation stands."""
    updatedOn: datetime.date
    """Last change."""
    note: str = ""
    """The state in words."""
    milestones: dict[str, MilestoneState] = Field(default_factory=dict)
    """Milestone id -> state."""
    errata: list[Erratum] = Field(default_factory=list)
    """Differences from the reference found after freezing (`clt protocol erratum`), printed by every report."""
    reportedStages: list[str] = Field(default_factory=list)
    """Every stage `clt report` has reported (the manifest `clt report --check` checks: each listed stage's results
    block and reports must be there; a stage once listed stays listed)."""
    codeAmendments: list[CodeAmendment] = Field(default_factory=list)
    """Changes of pinned component code after freezing (`clt protocol amend-code`), printed first by every
    report."""


class PackageStack(Strict):
    """Packages a protocol's runs need that the toolkit's environment does not hold (a simulator pinned to another
    version, a benchmark's package)."""

    requirements: Annotated[
        list[
            Annotated[
                str,
                Field(
                    min_length=1,
                    max_length=200,
                    pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?\s*(===?|~=|>=|<=|!=|<|>)?[^;\s@/]*$",
                ),
            ]
        ],
        Field(min_length=1, max_length=200),
    ]
    """Requirement specifiers (`metaworld==3.1.1`, `mujoco==3.3.0`): names with optional extras and one version
    clause; no URLs, paths or options (the resolution records where each file came from)."""
    python: str | None = Field(default=None, pattern=r"^3\.[0-9]{1,2}$")
    """The Python minor version the stack is resolved for (None: the toolkit's own)."""


class ProtocolBase(Strict):
    """The common envelope of every protocol (hashed except `status` and `results`)."""

    schema_uri: str | None = Field(default=None, alias="$schema")
    """The JSON Schema editors validate and complete this document with (e.g. `../schemas/protocol.schema.json`,
    written by `clt init`); clt itself ignores it. Hashed like every other field."""
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    """`<name>-v<N>`, equal to the file name."""
    suite: str
    """The suite that runs it."""
    title: str
    """Short title."""
    goal: str
    """What the evaluation is for."""
    schemaVersion: Literal[1, 2]
    """Version of this document format (`SCHEMA_VERSION` is the newest; 2 adds `analysis.clusters`)."""
    supersedes: Annotated[str, Field(pattern=r"^[a-z0-9.-]+-v[1-9][0-9]*@sha256:[0-9a-f]{64}$")] | None = None
    """`<id>@sha256:<hex>` of the frozen protocol this version replaces."""
    changes: list[DeclaredChange] = Field(default_factory=list)
    """What this version changes from the one it supersedes (`clt protocol diff` marks each difference declared or
    not; freezing refuses a new version with an undeclared change)."""
    comparisons: list[Comparison] = Field(default_factory=list)
    """Every method run, with its role and all hyperparameters."""
    budget: Budget = Field(default_factory=Budget)
    """Budget and fairness clauses."""
    metrics: list[MetricDecl] = Field(default_factory=list)
    """Metrics reported."""
    gates: list[Gate] = Field(default_factory=list)
    """Machine-readable claims decided by the gatekeeper."""
    analysis: AnalysisPlan = Field(default_factory=AnalysisPlan)
    """Statistics plan."""
    seeds: SeedPlan
    """Seeds, splits, task orders and stages."""
    evaluationSets: list[EvaluationSet] = Field(default_factory=list)
    """Evaluation sets, each with its held-out unit and OOD axis."""
    claims: list[Claim] = Field(default_factory=list)
    """Claims the protocol supports and their held-out units."""
    safeguards: list[Safeguard] = Field(default_factory=list)
    """Safeguards, with machine checks where they exist."""
    disclosures: list[str] = Field(default_factory=list)
    """What the report must disclose."""
    outsideScope: list[str] = Field(default_factory=list)
    """What the evaluation does not address."""
    milestones: list[Milestone] = Field(default_factory=list)
    """Declared milestones (their state lives in `status`)."""
    packages: PackageStack | None = None
    """The package stack the protocol's runs need beyond the toolkit's own (None: the toolkit's environment). At
    freezing, the requirements are resolved together with the toolkit's runtime requirements into exact versions and
    SHA-256 hashes (`registry/locks/<id>.packages.txt`, whose digest the lock records); `clt env build` makes the
    environment from that file alone, in pip's hash-checking mode."""
    status: Status | None = None
    """Mutable status (not hashed)."""
    results: Results | None = None
    """Written by the gatekeeper only (not hashed)."""

    @model_validator(mode="after")
    def _schema_of_analysis(self) -> ProtocolBase:
        self.analysis._schema = self.schemaVersion
        return self

    def reference_problems(self) -> list[tuple[str, str]]:
        """(JSON pointer, message) for every reference that does not resolve inside the document: repeated ids,
        gates naming undeclared metrics or comparisons, budget clauses naming unknown comparisons. Checked by
        `cltoolkit.protocol.validate` after parsing, so that each problem points at the field that holds it."""
        out: list[tuple[str, str]] = []
        ids = [c.id for c in self.comparisons]
        for i, cid in enumerate(ids):
            if cid in ids[:i]:
                out.append((f"/comparisons/{i}/id", f"comparison id {cid!r} is repeated (ids must be unique)"))
        metrics = {m.id for m in self.metrics}
        sets = [e.id for e in self.evaluationSets]
        for i, sid in enumerate(sets):
            if sid in sets[:i]:
                out.append((f"/evaluationSets/{i}/id", f"evaluation set id {sid!r} is repeated (ids must be unique)"))
        for i, metric in enumerate(self.metrics):
            if metric.evaluationSet is not None and metric.evaluationSet not in sets:
                out.append((f"/metrics/{i}/evaluationSet", f"unknown evaluation set {metric.evaluationSet!r}"))
        gate_ids = [g.id for g in self.gates]
        for i, gate in enumerate(self.gates):
            if gate.id in gate_ids[:i]:
                out.append((f"/gates/{i}/id", f"gate id {gate.id!r} is repeated (ids must be unique)"))
            if gate.metric not in metrics:
                out.append((f"/gates/{i}/metric", f"metric {gate.metric!r} is not among the protocol's metrics"))
            for field, ref in (("method", gate.method), ("reference", gate.reference)):
                if ref is not None and ref not in ids:
                    out.append((f"/gates/{i}/{field}", f"unknown comparison {ref!r} (known: {', '.join(ids)})"))
        for i, clause in enumerate(self.budget.match):
            for j, ref in enumerate(clause.across):
                if ref not in ids:
                    out.append((f"/budget/match/{i}/across/{j}", f"unknown comparison {ref!r}"))
        return out

    def evaluation_set(self, metric_id: str) -> EvaluationSet | None:
        """The evaluation set a declared metric is measured on, if it names one."""
        for metric in self.metrics:
            if metric.id == metric_id and metric.evaluationSet is not None:
                return next(e for e in self.evaluationSets if e.id == metric.evaluationSet)
        return None

    def comparison(self, comparison_id: str) -> Comparison:
        for comp in self.comparisons:
            if comp.id == comparison_id:
                return comp
        raise KeyError(comparison_id)

    def stage(self, stage_id: str | None) -> Stage:
        if stage_id is None:
            return self.seeds.stages[0]
        for stage in self.seeds.stages:
            if stage.id == stage_id:
                return stage
        from cltoolkit.errors import InputError

        raise InputError(
            f"{self.id}: unknown stage {stage_id!r}. Available: {', '.join(s.id for s in self.seeds.stages)}"
        )
