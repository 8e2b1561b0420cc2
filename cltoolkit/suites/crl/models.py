"""Protocol section of the `crl` suite: a declared stream of Gymnasium tasks, the learner, its evaluation (issue #55;
Continual World's defaults where a field has one, docs/cw10.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from cltoolkit.protocol._base import Slug, Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["CrlLearner", "CrlProtocol", "Evaluation", "PpoSettings", "Stream", "StreamTask", "Success"]

Scalar = str | int | float | bool | None


class Success(Strict):
    """When an evaluation episode counts as a success: Meta-World's `info["success"]` at any step (CW's
    `SuccessCounter`), or an episode return of at least a threshold (for environments without a success flag)."""

    info: str | None = None
    """An `info` key whose truthy value at any step makes the episode a success."""
    returnAtLeast: float | None = Field(default=None, ge=-1e12, le=1e12)
    """The episode return at or above which the episode is a success."""

    @model_validator(mode="after")
    def _one(self) -> Success:
        if (self.info is None) == (self.returnAtLeast is None):
            raise ValueError("give exactly one of `info` and `returnAtLeast`")
        return self


class StreamTask(Strict):
    """One task of the stream: a registered Gymnasium environment and its keyword arguments."""

    id: Slug
    """The task's id in the records and the report."""
    env: str = Field(min_length=1, max_length=200)
    """A Gymnasium id (`gymnasium.make(env, **kwargs)`): Box observations; Box actions for `sac`, Discrete for
    `sac-discrete` and `ppo`."""
    kwargs: dict[str, Scalar] = Field(default_factory=dict)
    """Keyword arguments of `gymnasium.make` (physics such as Pendulum's `g`, a Meta-World task name)."""
    wrappers: Annotated[
        list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", max_length=200)]],
        Field(max_length=8),
    ] = Field(default_factory=list)
    """Gymnasium wrappers applied in order after `make`, each a `module:attribute` called with the environment
    (e.g. `minigrid.wrappers:ImgObsWrapper` then `gymnasium.wrappers:FlattenObservation`: a MiniGrid task as Box
    observations)."""
    success: Success
    """What an evaluation episode must do to count."""


class Stream(Strict):
    """The task sequence, trained in order."""

    tasks: Annotated[list[StreamTask], Field(min_length=1, max_length=100)]
    """Tasks in training order."""
    stepsPerTask: int = Field(ge=1, le=10**8)
    """Environment steps per task (CW: 1,000,000)."""
    maxEpisodeSteps: int = Field(ge=1, le=10**6)
    """Every episode, training and evaluation, is cut at this many steps (CW: 200)."""

    @model_validator(mode="after")
    def _unique(self) -> Stream:
        ids = [t.id for t in self.tasks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"task ids repeat: {ids}")
        return self


class PpoSettings(Strict):
    """PPO's own fields (`learner.algorithm: "ppo"`; `cltoolkit.suites.crl.ppo`); each default is Stable-Baselines3's
    (`PPO`: 2,048 steps, 10 epochs of minibatches of 64, clip 0.2, GAE 0.95, entropy coefficient 0, value coefficient
    0.5, gradient norm 0.5, advantages normalised; its learning rate, 3e-4, is `learner.lr`'s to set)."""

    rolloutSteps: int = Field(default=2048, ge=2, le=10**7)
    """Environment steps per rollout; the updates follow each rollout (and a task's last, shorter, one)."""
    epochs: int = Field(default=10, ge=1, le=1000)
    """Passes over each rollout."""
    minibatches: int = Field(default=32, ge=1, le=65536)
    """Minibatches per pass (a rollout's rows shuffled and split evenly, one update each: 2,048 / 32 is SB3's 64)."""
    clipRatio: float = Field(default=0.2, gt=0, le=10)
    """The probability ratio's clip range (1 - clip, 1 + clip)."""
    gaeLambda: float = Field(default=0.95, ge=0, le=1)
    """GAE's lambda (the discount is `learner.gamma`)."""
    entropyCoef: float = Field(default=0.0, ge=0, le=100)
    """Weight of the policy's entropy bonus."""
    valueCoef: float = Field(default=0.5, ge=0, le=100)
    """Weight of the value function's mean squared error (SB3's form; CleanRL halves the error first)."""
    maxGradNorm: float | None = Field(default=0.5, gt=0, le=1e6)
    """The whole gradient clipped to this global norm after the method's gradient hooks (None: no clipping)."""
    normalizeAdvantages: bool = True
    """Each minibatch's advantages standardised (zero mean, unit variance), as SB3 and CleanRL do."""


SAC_ONLY = (
    "batchSize",
    "polyak",
    "targetOutputStd",
    "targetEntropyScale",
    "bufferSize",
    "resetBufferOnTaskChange",
    "startSteps",
    "updateAfter",
    "updateEvery",
    "clipNorm",
    "criticHeads",
)
"""The learner's fields that only SAC reads (PPO's are in `ppo`)."""


class CrlLearner(Strict):
    """SAC as Continual World trains it (`cltoolkit.suites.crl.sac`), each default CW's; or PPO for discrete actions
    (`cltoolkit.suites.crl.ppo`, its fields in `ppo`)."""

    algorithm: Literal["sac", "sac-discrete", "ppo"] = "sac"
    """`sac`: continuous (Box) actions, CW's learner; `sac-discrete`: discrete actions, soft actor-critic for discrete
    action settings (Christodoulou 2019) on the same networks, buffer, schedule and methods; `ppo`: discrete actions,
    proximal policy optimisation (Schulman et al. 2017) with GAE on CW's trunk (an actor and a value network), every
    method but those that keep an off-policy buffer (`ppo` learns from its own rollouts)."""
    hidden: Annotated[list[Annotated[int, Field(ge=1, le=4096)]], Field(min_length=1, max_length=8)] = Field(
        default_factory=lambda: [256, 256, 256, 256]
    )
    """Hidden widths of the actor and of each critic."""
    heads: Literal["per-task", "single"] = "per-task"
    """The actor's output: one head per task (CW's multi-head, the task picks it) or one for all."""
    criticHeads: Literal["per-task", "single"] = "single"
    """`sac`: the critics' output: one head per task, picked by each transition's task (CW's: its `run_cl.py`,
    `run_mt.py` and `run_single.py` give the critics as many heads as the actor), or one for all. The default is
    what every protocol frozen before this field was run with (one head), not CW's; a CW protocol sets "per-task"
    (docs/cw10.md). "per-task" needs `heads: "per-task"`."""
    lr: float = Field(default=1e-3, gt=0, le=1)
    """Adam's step size (CW's SAC: 1e-3; PPO's usual: 3e-4, set it)."""
    batchSize: int = Field(default=128, ge=1, le=65536)
    gamma: float = Field(default=0.99, ge=0, le=1)
    polyak: float = Field(default=0.995, ge=0, le=1)
    targetOutputStd: float | None = Field(default=0.089, gt=0, le=10)
    """`sac`: the per-dimension action std the entropy coefficient aims at (None: target entropy -act_dim)."""
    targetEntropyScale: float = Field(default=0.98, gt=0, le=1)
    """`sac-discrete`: the target entropy as a fraction of the maximum, log(actions) (Christodoulou 2019: 0.98)."""
    bufferSize: int = Field(default=1_000_000, ge=1, le=10**8)
    """Replay capacity (FIFO) in transitions."""
    resetBufferOnTaskChange: bool = True
    resetOptimizerOnTaskChange: bool = True
    startSteps: int = Field(default=10_000, ge=0, le=10**8)
    """Uniform-random actions for this many steps at the start of every task."""
    updateAfter: int = Field(default=1_000, ge=0, le=10**8)
    """No updates before this many steps of a task."""
    updateEvery: int = Field(default=50, ge=1, le=10**6)
    """Every this many steps, as many updates (one per step on average)."""
    clipNorm: float | None = Field(default=None, gt=0, le=1e6)
    """Clip the actor's gradient and the critics' to this global norm each, and the entropy coefficients' to this
    norm, after the method's gradient hooks and before the step (CW's `--clipnorm`; None, CW's default: no clipping;
    CW's PackNet runs use 2e-5)."""
    ppo: PpoSettings | None = None
    """`ppo`'s fields (its defaults where omitted); only with `algorithm: "ppo"`."""

    @model_validator(mode="after")
    def _fields_of_its_algorithm(self) -> CrlLearner:
        if self.algorithm == "ppo":
            fields = type(self).model_fields
            sac = [f for f in SAC_ONLY if getattr(self, f) != fields[f].get_default(call_default_factory=True)]
            if sac:
                raise ValueError(
                    f"{', '.join(sac)}: SAC's field(s), not read by algorithm 'ppo' (its fields are in `ppo`)"
                )
        elif self.ppo is not None:
            raise ValueError(f"`ppo` is read by algorithm 'ppo' only, not {self.algorithm!r}")
        if self.criticHeads == "per-task" and self.heads != "per-task":
            raise ValueError('criticHeads "per-task" needs heads "per-task" (a critic head per task picks it by task)')
        return self

    @property
    def ppo_settings(self) -> PpoSettings:
        """`ppo` with its defaults where the protocol omits it."""
        return self.ppo or PpoSettings()


class Evaluation(Strict):
    """Every `every` environment steps, `episodes` episodes of every task (the stream's, never training episodes)."""

    every: int = Field(ge=1, le=10**8)
    """Environment steps between evaluations (CW: 20,000); a task's last evaluation falls at its last step."""
    episodes: int = Field(ge=1, le=10_000)
    """Episodes per task per evaluation (CW: 10)."""
    deterministic: bool = False
    """Evaluate the policy's mean action instead of a sample (CW's metrics use the stochastic policy)."""
    last: int = Field(default=5, ge=1, le=10_000)
    """Evaluations averaged for performance and forgetting (CW: the last 5)."""
    seedOffset: int = Field(default=1_000_000, ge=0, le=2**31)
    """Evaluation episodes reset with seeds from seed + offset, a stream the training episodes never use."""


class CrlProtocol(ProtocolBase):
    """A continual-RL protocol: the stream, the learner and its evaluation."""

    suite: Literal["crl"]
    stream: Stream
    learner: CrlLearner = Field(default_factory=CrlLearner)
    evaluation: Evaluation

    @model_validator(mode="after")
    def _schedule(self) -> CrlProtocol:
        if self.evaluation.every > self.stream.stepsPerTask:
            raise ValueError(
                f"evaluation.every ({self.evaluation.every}) exceeds stream.stepsPerTask ({self.stream.stepsPerTask}):"
                " a task would be trained without an evaluation of its own"
            )
        return self
