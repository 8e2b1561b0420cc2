"""The analysis plan of a protocol (`analysis`): how its gates are tested, the permutation p, the unit of analysis
(`clusters`, schema 2) and the declared exclusion rules. Part of the envelope (`protocol.models` re-exports it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from cltoolkit.protocol._base import SeedValue, Slug, Strict

__all__ = ["LEGACY_EXACT_UP_TO", "AnalysisPlan", "ClusterPlan", "ExclusionRule", "PermutationPlan"]


class ExclusionRule(Strict):
    """A declared rule for excluding runs; always reported with the result with and without it."""

    id: Slug
    """Rule id."""
    description: str
    """When a run is excluded, in words."""
    statuses: list[Literal["failed", "crashed", "timeout"]]
    """Run statuses the rule excludes from the planned grid (they are still listed)."""


LEGACY_EXACT_UP_TO = 40
"""Schema-1 documents: sign-flip p-values were enumerated exactly up to at least this n whatever `exactUpTo` said
(the exact p is what Monte Carlo estimates); their reports say so. Schema 2 follows `exactUpTo` as declared."""


class PermutationPlan(Strict):
    """Sign-flip permutation p: all 2^n flips enumerated exactly up to `exactUpTo` replicates (schema 1: up to
    max(`exactUpTo`, 40)), Monte Carlo above with `monteCarloDraws` draws from `seed` (labelled with its draws and
    standard error)."""

    exactUpTo: int = Field(default=20, ge=1, le=40)
    """n up to which the p is enumerated exactly (schema 2: as declared; schema 1 documents: at least 40)."""
    monteCarloDraws: int = Field(default=100_000, ge=1000)
    """Draws above the exact range."""
    seed: SeedValue = 0
    """Seed of the Monte Carlo generator."""


class ClusterPlan(Strict):
    """The unit of analysis (schema 2): which replicates share data, models or random streams, and so are one unit.
    Replicates whose (seed, task order, cell group) agree on every part `by` names are one cluster; the gatekeeper
    averages each cluster's values (a comparison's paired differences, or a method's values) and tests the cluster
    means, n counted in clusters."""

    by: list[Literal["seed", "order", "cellGroup"]] = Field(min_length=1)
    """The parts of a replicate that name its cluster, e.g. `["seed"]` (a seed's task orders share its streams: one
    cluster per seed) or `["seed", "cellGroup"]` (a seed's cells that share task A are one cluster)."""
    cellGroups: list[list[str]] = Field(default_factory=list)
    """Cells that share data or models, one list per group; a cell in no group is a group of its own."""
    shares: str
    """What the replicates of one cluster share, in words (and any dependence the clusters do not capture)."""

    def cluster_of(self, seed: int, order: str | None, cell: str | None) -> str:
        """The cluster id of a replicate (readable: `seed=3|cells=gym-min+gym-med+gym-max`)."""
        parts = []
        for part in self.by:
            if part == "seed":
                parts.append(f"seed={seed}")
            elif part == "order":
                parts.append(f"order={order or '-'}")
            else:
                group = next((g for g in self.cellGroups if cell in g), [cell or "-"])
                parts.append("cells=" + "+".join(group))
        return "|".join(parts)


class AnalysisPlan(Strict):
    """How gates are tested and summarized; declared before any result."""

    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    """Familywise (Holm) or false-discovery (BH) level; one-sided tests use it directly."""
    multiplicity: Literal["holm", "bh", "none"] = "holm"
    """Correction over the confirmatory family."""
    interval: Literal["t"] = "t"
    """Interval method for replicate means and paired differences."""
    replicateUnit: str = "seed"
    """What one replicate is (e.g. `training seed x task order`); per replicate, one number."""
    aggregate: Literal["mean", "iqm", "median", "worst-case", "cvar"] = "mean"
    """The declared aggregate across tasks / runs for summaries (`cvar`: mean of the worst `tailFraction`)."""
    tailFraction: float = Field(default=0.25, gt=0.0, le=1.0)
    """Share of the worst scores the `cvar` aggregate averages."""
    targetPower: float = Field(default=0.8, gt=0.0, lt=1.0)
    """Planned power of each gate at its declared `delta` (checked at freeze against the declared seeds)."""
    permutation: PermutationPlan = Field(default_factory=PermutationPlan)
    """Permutation p-value settings."""
    bootstrapResamples: int = Field(default=10_000, ge=100)
    """Unused: refused when declared (nothing bootstraps; gate intervals are t-based)."""
    bootstrapSeed: int = 0
    """Unused: refused when declared."""
    exclusions: list[ExclusionRule] = Field(default_factory=list)
    """Declared exclusion rules; no run is dropped otherwise."""
    allowMixedToolkitVersions: bool = False
    """Allow records produced by different toolkit versions in one report."""
    normalization: dict[str, tuple[float, float]] | None = None
    """Unused: refused when declared (the gatekeeper normalizes no score)."""
    zeroGapRule: Literal["undefined", "refuse"] = "undefined"
    """Unused: refused when declared (the gatekeeper normalizes no score)."""
    clusters: ClusterPlan | None = None
    """The unit of analysis (schema 2): the gatekeeper tests cluster means, n counted in clusters."""
    _schema: int = PrivateAttr(default=1)
    """The document's schemaVersion (set by `ProtocolBase`): how `permutation` is read."""

    def exact_up_to(self) -> int:
        """n up to which sign-flip p-values are exact: `permutation.exactUpTo` as declared (schema 2), at least
        `LEGACY_EXACT_UP_TO` in schema-1 documents (what their frozen results were computed with)."""
        declared = self.permutation.exactUpTo
        return declared if self._schema >= 2 else max(declared, LEGACY_EXACT_UP_TO)

    def permutation_plan_note(self) -> str | None:
        """A schema-1 document whose declared exact range the code exceeded, in words (None otherwise)."""
        declared = self.permutation.exactUpTo
        if self._schema >= 2 or declared >= LEGACY_EXACT_UP_TO:
            return None
        return (
            f"permutation p-values are exact up to n = {LEGACY_EXACT_UP_TO}, where this schema-1 protocol declared "
            f"exact up to {declared} and {self.permutation.monteCarloDraws} Monte Carlo draws above: the exact p is "
            "the value Monte Carlo estimates (schema 2 follows the declared plan literally)"
        )

    @model_validator(mode="after")
    def _zero_gap(self) -> AnalysisPlan:
        if self.zeroGapRule == "refuse":
            equal = sorted(task for task, (weak, strong) in (self.normalization or {}).items() if weak == strong)
            if equal:
                raise ValueError(f"normalization anchors are equal for {', '.join(equal)} and zeroGapRule is 'refuse'")
        return self
