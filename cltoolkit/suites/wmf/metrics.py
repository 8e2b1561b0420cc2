"""wmf metrics (WorldModelsBenchmark). Each is one number per run (cell, method, seed): the replicate is the run. D_A is
the set of held-out task-A transitions (z, a, z') encoded once by the post-A model; NLL(M, D) = mean -log p_M(z' | z, a)
from h = 0; reconstruction is the squared pixel error per frame (64x64x3 values in [0, 1]) of decoding the posterior
mean on held-out frames. Null means "not measured", never 0."""

from __future__ import annotations

from typing import ClassVar

from cltoolkit.components import Metric

__all__ = ["METRICS"]


class WmfMetric(Metric):
    suite: ClassVar[str] = "wmf"
    key: ClassVar[str]
    """The run record's metrics field."""


class PredictionFidelity(WmfMetric):
    """PF = NLL(M_B, D_A) - NLL(M_A, D_A): positive when the model predicts task-A transitions worse after task B.
    Blind to encoder drift (the latents are fixed)."""

    id: ClassVar[str] = "wmf.pf-v1"
    key: ClassVar[str] = "pf"
    unit: ClassVar[str] = "nats"
    higher_is_better: ClassVar[bool] = False


class RolloutDivergence(WmfMetric):
    """RD = mean over H steps and S start states of D_A of KL(p_A(z_t) || p_B(z_t)) along imagined rollouts of the
    post-A and post-B models driven by the same actions resampled from D_A (each propagating its prior mean)."""

    id: ClassVar[str] = "wmf.rd-v1"
    key: ClassVar[str] = "rd"
    unit: ClassVar[str] = "nats"
    higher_is_better: ClassVar[bool] = False


class WorldModelForgetting(WmfMetric):
    """WMF = alpha PF + beta RD (+ gamma PIS, withdrawn: gamma null). Reported beside `wmfRdShare` =
    |beta RD| / (|alpha PF| + |beta RD|), the share of it that comes from RD; not a headline number."""

    id: ClassVar[str] = "wmf.wmf-v1"
    key: ClassVar[str] = "wmf"
    unit: ClassVar[str] = "nats"
    higher_is_better: ClassVar[bool] = False


class ForwardTransfer(WmfMetric):
    """FT = recon_B(from-scratch B reference) - recon_B(method after B), held-out task-B frames in pixel space:
    positive when training on A first helped B under the same budget and data."""

    id: ClassVar[str] = "wmf.ft-v1"
    key: ClassVar[str] = "ft"
    unit: ClassVar[str] = "squared error per frame"
    higher_is_better: ClassVar[bool] = True


class TaskAFitGain(WmfMetric):
    """NLL(random init, D_A) - NLL(M_A, D_A): how well task A was learned (no task-B data enters it)."""

    id: ClassVar[str] = "wmf.task-a-fit-gain-v1"
    key: ClassVar[str] = "taskAFitGain"
    unit: ClassVar[str] = "nats"
    higher_is_better: ClassVar[bool] = True


class EncoderDrift(WmfMetric):
    """recon_A(after B) / recon_A(after A) on held-out task-A frames: forgetting in the encoder / decoder, which PF
    and RD cannot see. 1 = none."""

    id: ClassVar[str] = "wmf.encoder-drift-v1"
    key: ClassVar[str] = "encoderDrift"
    unit: ClassVar[str] = "ratio"
    higher_is_better: ClassVar[bool] = False


class ReconstructionAAfterB(WmfMetric):
    """Held-out task-A reconstruction error per frame after training on task B."""

    id: ClassVar[str] = "wmf.recon-a-after-b-v1"
    key: ClassVar[str] = "reconAAfterB"
    unit: ClassVar[str] = "squared error per frame"
    higher_is_better: ClassVar[bool] = False


class ReconstructionAAfterA(WmfMetric):
    """Held-out task-A reconstruction error per frame after training on task A (was there something to forget)."""

    id: ClassVar[str] = "wmf.recon-a-after-a-v1"
    key: ClassVar[str] = "reconAAfterA"
    unit: ClassVar[str] = "squared error per frame"
    higher_is_better: ClassVar[bool] = False


class ParameterDistance(WmfMetric):
    """d_param = ||p_B - p_A|| / ||p_A|| of [gravity, mass scale, friction scale]; null where the pair is not a physics
    change of one environment."""

    id: ClassVar[str] = "wmf.d-param-v1"
    key: ClassVar[str] = "dParam"
    unit: ClassVar[str] = "ratio"
    higher_is_better: ClassVar[bool] = False


class TransitionDistance(WmfMetric):
    """d_trans = mean over D_A (encoded by the from-scratch A model) of KL(p_A(z'|z,a) || p_B(z'|z,a)) between the
    from-scratch models of A and B, from h = 0. The B model reads A's latent basis (a property of the seed's
    definition: the two models' bases are unrelated)."""

    id: ClassVar[str] = "wmf.d-trans-v1"
    key: ClassVar[str] = "dTrans"
    unit: ClassVar[str] = "nats"
    higher_is_better: ClassVar[bool] = False


METRICS: dict[str, type[WmfMetric]] = {
    m.id: m
    for m in (
        PredictionFidelity,
        RolloutDivergence,
        WorldModelForgetting,
        ForwardTransfer,
        TaskAFitGain,
        EncoderDrift,
        ReconstructionAAfterB,
        ReconstructionAAfterA,
        ParameterDistance,
        TransitionDistance,
    )
}
