"""Protocol sections of the `wmf` suite (the world-model forgetting benchmark of WorldModelsBenchmark, the seed
document 000's reference code): families and task pairs, data, the world model, training, evaluation and the declared
method pairs of the analysis."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase, SeedValue

__all__ = [
    "Adequacy",
    "Family",
    "Level",
    "SeedAnalyses",
    "WmfData",
    "WmfEvaluation",
    "WmfModel",
    "WmfProtocol",
    "WmfTraining",
]


class Physics(Strict):
    """Physics of a task, applied at runtime."""

    gravity: float | None = None
    """Gravity magnitude (m/s^2); null where the family has none."""
    massScale: float = 1.0
    """Multiplier of every body mass."""
    frictionScale: float = 1.0
    """Multiplier of every friction coefficient."""


class TaskRef(Strict):
    """One task of a pair."""

    env: str
    """Environment id of the family (e.g. `MiniGrid-Empty-5x5-v0`, `HalfCheetah-v5`, `cheetah/run`)."""
    physics: Physics = Field(default_factory=Physics)
    """Physics changes applied at runtime."""


class Level(Strict):
    """One labelled dynamic distance: a task pair."""

    id: Literal["min", "med", "max"]
    """Distance label."""
    taskA: TaskRef
    """First task."""
    taskB: TaskRef
    """Second task."""
    seeds: list[SeedValue] = Field(min_length=1)
    """Training seeds of this cell."""


class Family(Strict):
    """An environment family with its three levels."""

    id: Literal["minigrid", "gym", "dmc"]
    """Family id."""
    renderer: Literal["minigrid", "mujoco", "dm_control"]
    """How frames are produced."""
    rendering: Literal["native-64", "default-resized", "track-resized"] = "native-64"
    """`native-64` (wmf-v1): frames rendered small (MiniGrid tile size 8, MuJoCo 64 x 64 from the `track` camera)
    with MuJoCo's shadows off, resized to 64 x 64 where the grid is not 8 x 8. `default-resized` (WorldModelsBenchmark's
    `src/envs/*_env.py`): each environment's default `rgb_array` frame (MiniGrid tile size 32, Gymnasium MuJoCo
    480 x 480 from its default camera) resized to 64 x 64 with PIL bilinear, shadows as the model defines them;
    dm_control renders 64 x 64 from camera 0 in both. Gymnasium 1.x's default camera for HalfCheetah is the free
    camera (it never follows the cheetah); gymnasium 0.29.1, WorldModelsBenchmark's pin, renders the model's `track`
    camera when none is named. `track-resized` (wmf-v4): as `default-resized`, HalfCheetah from the `track` camera."""
    levels: list[Level] = Field(min_length=1)
    """Distance levels."""


class WmfData(Strict):
    """Random-policy data per task."""

    trainEpisodes: int = Field(ge=1)
    """Training episodes per task."""
    heldOutEpisodes: int = Field(ge=1)
    """Held-out episodes per task, collected separately (their own reset seeds)."""
    maxEpisodeSteps: int = Field(ge=2)
    """Episodes are cut at this many steps."""
    policy: Literal["uniform-random"] = "uniform-random"
    """Data policy: uniform random actions (one-hot for MiniGrid)."""
    windows: Literal["uniform-over-windows", "episode-then-start"] = "uniform-over-windows"
    """How a training window is drawn: uniformly over all windows of the task (wmf-v1, wmf-v2), or an episode
    uniformly, then a start uniformly within it (WorldModelsBenchmark's `src/utils/buffer.py`)."""
    terminalFrame: Literal["stored", "dropped"] = "stored"
    """`stored` (wmf-v1, wmf-v2): an episode's frame after its last action enters training windows, D_A and the
    reconstruction frames. `dropped` (WorldModelsBenchmark's buffer, which stores each step's frame before its action):
    it never does, and an episode with fewer steps than `training.sequenceLength` is not used at all."""
    collectionSeeds: Literal["by-task", "by-role", "seed-stream"] = "by-task"
    """`by-task` (wmf-v1, wmf-v2): the episodes of a task are seeded by the task (environment and physics), so a
    task that is B in one cell and A in the next has the same episodes in both and the cells are correlated.
    `by-role`: the seed also names the role (A or B), as WorldModelsBenchmark seeds env_A with the seed and env_B with
    seed + 1. `seed-stream` (WorldModelsBenchmark's `collect_cell_buffers`): one environment per task, seeded once
    (task A with the seed, task B with seed + 1: its episode stream and its own action sampler), its training
    episodes then its held-out ones walking that stream; so every cell of a family whose task A is the same has the
    same task-A data, and the task-A phase (which sees only task-A data) is one stage shared by those cells."""


class WmfModel(Strict):
    """ConvVAE + recurrent transition sizes."""

    latent: int = Field(ge=1)
    """Latent width."""
    hidden: int = Field(ge=1)
    """GRU hidden width (per column / expert)."""
    channels: tuple[int, int, int, int]
    """Encoder convolution widths (the decoder mirrors them)."""
    beta: float = Field(gt=0)
    """Weight of KL(q(z|x) || p(z|h)) in the loss."""
    decoder: Literal["1x1", "2x2-crop"] = "1x1"
    """`1x1` (wmf-v1): World Models' decoder, Linear(latent, 4 c4) as a 1 x 1 map to 64 x 64 directly. `2x2-crop`:
    WorldModelsBenchmark's code, Linear(latent, 4 c4) as (c4, 2, 2) to 80 x 80, then the centre 64 x 64 crop."""
    initialisation: Literal["shared", "independent"] = "shared"
    """`shared` (wmf-v1, wmf-v2): the task-A model, the from-scratch task-B reference and the random-init reference
    start from one initialisation. `independent` (WorldModelsBenchmark): the task-B reference and the random-init
    reference are each drawn on their own (the seed draws them later from its global generator)."""
    varianceEpsilon: float = Field(default=0.0, ge=0.0)
    """Added to the prior variance where it divides by it: the training KL, the transition NLL of PF and the task-A
    fit, and the EWC Fisher's NLL. 0 (wmf-v1, wmf-v2): exact division. WorldModelsBenchmark adds 1e-8 (rssm.py,
    ug_mtm.py, progressive_nets.py, metrics.py, ewc.py); RD's KL is exact in both."""


class WmfTraining(Strict):
    """Per-task training."""

    updatesPerTask: int = Field(ge=1)
    """Gradient updates per task."""
    batch: int = Field(ge=1)
    """Windows per update."""
    sequenceLength: int = Field(ge=2)
    """Frames per window."""
    lr: float = Field(gt=0)
    """Adam learning rate (Adam rebuilt for task B over the trainable parameters)."""
    curvePoints: int = Field(ge=1)
    """Points of each task's training-loss curve."""
    torchThreads: int = Field(default=1, ge=1)
    """Torch threads per run."""
    nonFinite: Literal["fail", "skip"] = "fail"
    """A NaN or infinite loss term or gradient: `fail` ends the run as `non-finite`, naming task, update, term and
    hook; `skip` is WorldModelsBenchmark's policy (the update is dropped), at most `maxSkippedSteps` per phase, every
    skipped update counted in the record (`nanStepsA` / `nanStepsB`) and shown per method in the report."""
    maxSkippedSteps: int = Field(default=0, ge=0, le=10**9)
    """With `nonFinite` skip: the most updates a phase may skip; one more ends the run as `non-finite`."""


class WmfEvaluation(Strict):
    """Evaluation sets and metric settings."""

    transitions: int = Field(ge=1)
    """|D_A|: held-out task-A transitions, encoded once by the post-A model."""
    fisherSet: Literal["disjoint-from-DA", "independent"] = "disjoint-from-DA"
    """How EWC's importance set is drawn from the held-out task-A transitions: disjoint from D_A (wmf-v1, wmf-v2), or
    independently of it (WorldModelsBenchmark, `seed + 10000`: a few transitions may be in both)."""
    fisherTransitions: int = Field(ge=1)
    """Held-out task-A transitions for EWC's Fisher (disjoint from D_A)."""
    reconstructionFrames: int = Field(ge=1)
    """Held-out frames per task for pixel reconstruction."""
    rdHorizon: int = Field(ge=1)
    """Rollout divergence horizon."""
    rdStarts: int = Field(ge=1)
    """Rollout divergence start states (from D_A)."""
    wmfWeights: tuple[float, float, float | None]
    """(alpha, beta, gamma) of WMF = alpha PF + beta RD + gamma PIS; gamma null: PIS withdrawn (never measured)."""


class MethodPair(Strict):
    """A declared paired comparison of the analysis (exact paired permutation test, Holm over the family)."""

    method: str
    """Comparison id."""
    reference: str
    """Comparison id."""
    metric: str
    """Record metric compared."""


class Adequacy(Strict):
    """Declared thresholds for "this model was trained enough for the metrics that rest on it" (the report names, at
    its top, every cell and metric that rests on a model below them)."""

    taskAFitGainMin: float
    """Minimum task-A fit gain NLL(random init, D_A) - NLL(M_A, D_A) (nats) for task A to count as learned."""
    reconstructionRatioMax: float = Field(gt=0)
    """Maximum held-out reconstruction after training over the same model's at its initialisation: task A after A
    (the method's task-A model) and task B for the from-scratch reference."""
    rationale: str
    """Where the numbers come from."""


class FingerprintRange(Strict):
    """The reference's first task-A update losses for one task A of one family."""

    family: str
    """Family id."""
    taskA: str
    """Task A's environment id (MiniGrid's cells have different tasks A)."""
    low: float
    """Smallest stored value."""
    high: float
    """Largest stored value."""
    values: int = Field(ge=1)
    """How many distinct stored values the range comes from."""


class Fingerprint(Strict):
    """A check, before anything is measured, that a run's frames and model are the reference's: the reconstruction
    loss of the first task-A update (a freshly initialised ConvVAE on the first batch of frames) depends on the frames
    far more than on the draws, so a wrong camera or resize shows at once (WorldModelsBenchmark's HalfCheetah: 514-529
    from the `track` camera, about 2,000 from Gymnasium 1.x's free camera). A run outside its range fails right after
    its task-A phase (`fingerprint:`), and the report lists the check per family."""

    metric: Literal["firstUpdateReconstructionLossA"]
    """The record metric compared."""
    margin: float = Field(ge=0, le=1)
    """The stored range widened by this fraction of its ends on either side ([low (1 - m), high (1 + m)]): this
    toolkit's initialisation and batch draws differ from the reference's (declared), so its values vary about as the
    reference's do, not inside their exact extremes."""
    ranges: list[FingerprintRange] = Field(min_length=1)
    """Per family and task A."""
    source: str
    """Where the ranges come from (file and field)."""

    def bounds(self, family: str, task_a: str) -> tuple[float, float] | None:
        """The accepted [low, high] of a family's task A, or None when the protocol declares none."""
        for r in self.ranges:
            if r.family == family and r.taskA == task_a:
                return r.low * (1 - self.margin), r.high * (1 + self.margin)
        return None


class SeedAnalyses(Strict):
    """WorldModelsBenchmark's descriptive analyses (`experiments/summarize_results.py`)."""

    axisMethods: list[str] = Field(min_length=1)
    """Comparisons whose RD the distance axis aggregates: per cell the median over these methods of each method's
    median over seeds; Spearman of it against the labelled level, d_trans and task-B difficulty (the same median of
    the methods' held-out task-B reconstruction after B)."""
    controlThreshold: float = Field(gt=0)
    """A control cell: no method's median relative task-A loss (recon A after B - after A) / after A exceeds this."""
    skewFactor: float = Field(gt=0)
    """A cell's sample is right-skewed when max - median > factor x (median - min)."""


class WmfProtocol(ProtocolBase):
    """A wmf protocol."""

    suite: Literal["wmf"]
    """The `wmf` suite."""
    families: list[Family] = Field(min_length=1)
    """Families x distance levels = cells."""
    design: str
    """The benchmark design in words."""
    data: WmfData
    """Data per task."""
    model: WmfModel
    """World model sizes."""
    training: WmfTraining
    """Training per task."""
    evaluation: WmfEvaluation
    """Evaluation sets and metric settings."""
    methodPairs: list[MethodPair] = Field(default_factory=list)
    """Declared paired comparisons (one Holm family)."""
    reference: str | None = None
    """Path (from the project folder) of the seed repository's stored run metrics to compare with (e.g.
    `reference/wmf-seed000-metrics.json`): the report then has a section "Reproduction of WorldModelsBenchmark"."""

    adequacy: Adequacy | None = None
    """Training-adequacy thresholds (the report's adequacy section)."""
    seedAnalyses: SeedAnalyses | None = None
    """WorldModelsBenchmark's distance axis, control cells and skew flags (the report's seed-analysis section)."""
    fingerprint: Fingerprint | None = None
    """The reference's first task-A update losses a run must match before it measures anything (wmf-v4)."""

    def cell(self, cell_id: str) -> tuple[Family, Level]:
        """`<family>-<level>` -> its family and level."""
        family_id, level_id = cell_id.split("-", 1)
        family = next(f for f in self.families if f.id == family_id)
        return family, next(lv for lv in family.levels if lv.id == level_id)

    def cell_ids(self) -> list[str]:
        return [f"{f.id}-{lv.id}" for f in self.families for lv in f.levels]
