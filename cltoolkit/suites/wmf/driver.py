"""One wmf run: (cell, method, seed) -> the metrics of WorldModelsBenchmark's benchmark.

Stages (shared through `StageCache`, keyed by content): the four data sets of the cell (train / held-out x A / B),
the plain-RSSM task-A phase (finetuning, replay_infinite, ewc and progressive_nets start from it, and it is the
task-A reference), UG-MTM's own task-A phase, and the from-scratch task-B reference. The task-B phase is the run's
own. Every seed below is derived from the run seed and the stage's role, never from the order runs happen in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cltoolkit.errors import BudgetViolation, FingerprintMiss
from cltoolkit.suites.guards import SampleCounter, overrides, unchanged
from cltoolkit.suites.masks import Ownership
from cltoolkit.suites.step import Step
from cltoolkit.suites.wmf import evaluate as ev
from cltoolkit.suites.wmf.api import (
    _SUITE_TOKEN,
    ImportanceSet,
    Minibatch,
    ModelSpec,
    Sampling,
    TaskEnd,
    TaskStart,
    TrainingSet,
    WorldModelMethod,
    _episodes_of,
    _suite_training_set,
)
from cltoolkit.suites.wmf.data import derived_seed, stage_data
from cltoolkit.suites.wmf.envs import Episodes
from cltoolkit.suites.wmf.memory import MemoryRequest, Selection, WindowMemory
from cltoolkit.suites.wmf.models import Family, TaskRef, WmfProtocol
from cltoolkit.suites.wmf.stages import StageCache
from cltoolkit.suites.wmf.train import Phase, StepHooks, batch_tensors, state, train_phase
from cltoolkit.suites.wmf.world import RSSM, gaussian_kl

__all__ = ["run_cell"]


def _check_fingerprint(protocol: WmfProtocol, family: Family, task_a: TaskRef, first: float | None) -> None:
    """Fail the run (`fingerprint:`) when its first task-A update loss lies outside the protocol's declared range."""
    if protocol.fingerprint is None:
        return
    bounds = protocol.fingerprint.bounds(family.id, task_a.env)
    if bounds is None:
        return
    low, high = bounds
    if first is None or not low <= first <= high:
        raise FingerprintMiss(
            f"{FingerprintMiss.PREFIX} the first task-A update's reconstruction loss is {first} ({family.id}, "
            f"{task_a.env}); the protocol's fingerprint accepts [{low:.1f}, {high:.1f}] (the reference's stored values "
            "widened by the declared margin): these frames or this model are not the reference's"
        )


def _fresh(
    protocol: WmfProtocol, build: Callable[[ModelSpec], RSSM], width: int, seed: int, device: str, role: str = ""
) -> RSSM:
    """A freshly initialised model (on the CPU, so every device starts from the same weights), then moved. With
    `model.initialisation` independent, a `role` (the task-B reference, the random-init reference) draws its own."""
    m = protocol.model
    independent = m.initialisation == "independent" and role
    torch.manual_seed(derived_seed(seed, "init", role) if independent else derived_seed(seed, "init"))
    model = build(ModelSpec(m.latent, m.hidden, width, m.channels, m.beta))
    if not isinstance(model, RSSM):
        raise TypeError(f"build() must return a cltoolkit RSSM (or a subclass), got {type(model).__name__}")
    if m.decoder == "2x2-crop":
        model.vae.use_seed_decoder()
    model.var_eps = m.varianceEpsilon
    return model.to(device)


_V3_MODEL = frozenset({"initialisation", "varianceEpsilon"})
_V4_TRAINING = frozenset({"nonFinite", "maxSkippedSteps"})
_V3_DATA = frozenset({"windows", "terminalFrame", "collectionSeeds"})
"""Options wmf-v3 added: in a stage's key only when not at their default, so earlier versions' keys stay as they
were."""


def _at_default(section: Any, names: frozenset[str]) -> set[str]:
    fields = type(section).model_fields
    return {n for n in names if getattr(section, n) == fields[n].default}


def _plain(spec: ModelSpec) -> RSSM:
    return RSSM(spec.latent, spec.hidden, spec.action, spec.channels, spec.beta)


def _guarded(model: RSSM, hook: str, call: Callable[[], None]) -> None:
    """Run a method hook that must not change any existing parameter's values (surgery may add parameters and
    freeze some; compared bit for bit, so a NaN is never taken for a change); a change is a budget violation:
    compute the suite did not count."""
    unchanged(model.named_parameters, hook, call, "parameter values")


def _rows(data: Episodes, n: int, seed: int, role: str, skip: np.ndarray | None = None) -> np.ndarray:
    rows = data.transitions()
    order = np.random.default_rng(derived_seed(seed, role)).permutation(len(rows))
    if skip is not None:
        taken = {tuple(r) for r in skip.tolist()}
        order = np.asarray([i for i in order if tuple(rows[i].tolist()) not in taken], dtype=np.int64)
    return rows[np.sort(order[:n])]


def run_cell(
    protocol: WmfProtocol,
    cell: str,
    method: WorldModelMethod[Any],
    seed: int,
    store: Path,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train and evaluate one (cell, method, seed) on `device` (a torch device string); returns the record's
    metrics, budget and reused stages. The method is called through its public hooks only (`api.py`). Stages are
    cached on the CPU, so a stage trained on one device is reused on another; its key says nothing about the
    device."""
    torch.set_num_threads(protocol.training.torchThreads)
    family, level = protocol.cell(cell)
    cache = StageCache(store)
    cfg, ev_cfg = protocol.training, protocol.evaluation
    data = {
        (task, split): stage_data(cache, protocol, family, ref, task, split, seed)
        for task, ref in (("A", level.taskA), ("B", level.taskB))
        for split in ("train", "heldout")
    }
    training = {task: _suite_training_set(data[task, "train"], task) for task in ("A", "B")}
    width = int(data["A", "train"].actions.shape[-1])
    if int(data["B", "train"].actions.shape[-1]) != width:
        raise ValueError(f"{cell}: tasks A and B have different action widths")
    streamed = protocol.data.collectionSeeds == "seed-stream"
    options = protocol.data.model_dump(mode="json", include=set(_V3_DATA - _at_default(protocol.data, _V3_DATA)))
    if streamed:
        data_key: dict[str, Any] = {task: cache.used[f"data-{task}"] for task in ("A", "B")}
    else:
        data_key = {f"{split}-{task}": cache.used[f"data-{split}-{task}"] for task, split in data}
    data_key.update(options)
    model_key = {
        "model": protocol.model.model_dump(mode="json", exclude=_at_default(protocol.model, _V3_MODEL)),
        "training": cfg.model_dump(mode="json", exclude=_at_default(cfg, _V4_TRAINING)),
        "data": data_key,
        "seed": seed,
    }
    # The task-A phase sees task A's data only: with `seed-stream` its key names nothing of task B, so the cells of a
    # family with one task A share it (WorldModelsBenchmark's common task-A model); earlier versions keep their keys.
    model_key_a = {**model_key, "data": {"A": data_key["A"], **options}} if streamed else model_key
    batch = cfg.batch
    stream = method.stream_name
    episode_first = protocol.data.windows == "episode-then-start"

    replayed: dict[str, int] = {}
    """Per task phase: windows drawn from other tasks' training data (counted by the suite)."""
    own_drawn: dict[str, int] = {}
    """Per task phase: windows drawn from the task's own training data."""
    declared = protocol.budget
    policy = declared.unaccountedSamples
    skip = cfg.maxSkippedSteps if cfg.nonFinite == "skip" else None
    counts = {"other": 0, "bookkeeping": 0, "otherWindows": 0, "memoryDraws": 0}
    """Frames of the method's task-B phase that reached the encoder from neither the update's windows nor the
    suite's replay (`other`), or without gradients / outside the updates (`bookkeeping`)."""
    active: dict[str, SampleCounter | None] = {"counter": None}
    """The counter of the phase in progress (a memory draw inside an update is a memory sample)."""
    memory_rng = np.random.default_rng(np.random.SeedSequence([derived_seed(seed, "memory", stream)]))

    def draw(sources: list[tuple[TrainingSet, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch from the method's memory, drawn and counted by the suite (windows of replay)."""
        obs_parts, act_parts = [], []
        for src, n in sources:
            held = src._rows
            assert held is not None
            o, a = batch_tensors(src._episodes, held[memory_rng.integers(len(held), size=n)], cfg.sequenceLength)
            obs_parts.append(o)
            act_parts.append(a)
        obs, actions = torch.cat(obs_parts).to(device), torch.cat(act_parts).to(device)
        counts["memoryDraws"] += int(obs.shape[0])
        counter = active["counter"]
        if counter is not None:
            counter.drew(obs)
        return obs, actions

    def make_memory(capacity: int, selection: Selection) -> WindowMemory:
        return WindowMemory(capacity, selection, memory_rng, cfg.sequenceLength, draw, _token=_SUITE_TOKEN)

    memory_request = MemoryRequest(make_memory, declared.memoryCapacity)

    def start(task: str) -> TaskStart:
        return TaskStart(task, "AB".index(task), training[task], batch, cfg.updatesPerTask, memory_request)

    if declared.gradientUpdatesPerTask is not None and cfg.updatesPerTask > declared.gradientUpdatesPerTask:
        raise BudgetViolation(
            f"budget.gradientUpdatesPerTask: each task phase takes {cfg.updatesPerTask} updates "
            f"(training.updatesPerTask); the protocol declares at most {declared.gradientUpdatesPerTask}"
        )

    def on_other(task: str, frames: int, update: int) -> None:
        if policy == "replay" and task == "B":
            counts["other"] += frames
            return
        raise BudgetViolation(
            f"budget.unaccountedSamples: in task {task}, update {update}, {frames} frame(s) reached the encoder with "
            "gradients that were neither the update's windows nor the suite's replay (a private buffer?); the "
            "protocol declares such samples a violation (replay through `sampling()`, or declare "
            '`"unaccountedSamples": "replay"` in a new version)'
        )

    def train(model: RSSM, task: TaskStart, seed_: int, hooks: bool) -> Phase:
        """One task phase of `task.updates` updates; with `hooks`, the method's surgery, sampling, loss term and step
        hooks (else the task's windows)."""
        phase_cfg = (
            cfg if task.updates == cfg.updatesPerTask else cfg.model_copy(update={"updatesPerTask": task.updates})
        )
        sampling = Sampling([(task.training, batch)])
        step_hooks = StepHooks(task.task, skip_non_finite=skip)
        counter: SampleCounter | None = None
        if hooks:
            counter = SampleCounter(model.vae.encoder)
            with counter.armed():
                _guarded(model, "begin_task", lambda: method.begin_task(model, task))
            sampling = method.sampling(task)

            def extra(m: RSSM, obs: torch.Tensor, actions: torch.Tensor, step: int) -> torch.Tensor | None:
                return method.extra_loss(m, Minibatch(obs, actions, task.task, step))

            def armed(hook: str, call: Callable[[Step], None]) -> Callable[[Step], None]:
                def run(step: Step) -> None:
                    assert counter is not None
                    with counter.armed():
                        _guarded(model, hook, lambda: call(step))

                return run

            after = {
                hook: armed(hook, partial(getattr(method, hook), model))
                for hook in ("after_backward", "after_step")
                if overrides(method, WorldModelMethod, hook)
            }
            step_hooks = StepHooks(
                task.task,
                extra,
                after_backward=after.get("after_backward"),
                after_step=after.get("after_step"),
                counter=counter,
                on_other=partial(on_other, task.task),
                skip_non_finite=skip,
            )
        sources = [(_episodes_of(src, "sampling()"), int(n)) for src, n in sampling.sources]
        rows = [src._rows for src, _ in sampling.sources]
        if sum(n for _, n in sources) != batch or any(n < 0 for _, n in sources):
            raise BudgetViolation(
                f"sampling() asks for {[n for _, n in sources]} windows per update; they must sum to the batch, {batch}"
            )
        held = sum(
            src.transitions if src.held is None else src.held
            for src, n in sampling.sources
            if src.task != task.task and n > 0
        )
        if declared.memoryCapacity is not None and held > declared.memoryCapacity:
            raise BudgetViolation(
                f"budget.memoryCapacity: task {task.task}'s sampling() replays {held} transitions (or memory "
                f"windows) of earlier tasks; the protocol declares at most {declared.memoryCapacity}"
            )
        try:
            if counter is not None:
                with counter.armed():
                    active["counter"] = counter
                    log = train_phase(
                        model, sources, phase_cfg, seed_, step_hooks,
                        uniform_episodes=sampling.uniform_episodes, episode_first=episode_first, restricted=rows,
                    )  # fmt: skip
                    active["counter"] = None
                if task.task == "B":
                    counts["bookkeeping"] += counter.bookkeeping
            else:
                log = train_phase(
                    model, sources, phase_cfg, seed_, step_hooks,
                    uniform_episodes=sampling.uniform_episodes, episode_first=episode_first, restricted=rows,
                )  # fmt: skip
        finally:
            if counter is not None:
                counter.close()
        replayed[task.task] = sum(
            n for (src, _), n in zip(sampling.sources, log.drawn, strict=True) if src.task != task.task
        )
        own_drawn[task.task] = sum(log.drawn) - replayed[task.task]
        if policy == "replay" and counts["other"]:
            counts["otherWindows"] = -(-counts["other"] // cfg.sequenceLength)  # charged as replayed windows
        return log

    masking = method.own_task_a_model and overrides(method, WorldModelMethod, "ownership")
    retrain = method.retrain_updates() if masking else 0
    if not 0 <= retrain < cfg.updatesPerTask:
        raise ValueError(
            f"retrain_updates() is {retrain}: at least 0 and below training.updatesPerTask, {cfg.updatesPerTask}"
        )

    def phase(build: Callable[[ModelSpec], RSSM], task: str, hooks: bool, role: str = "") -> dict[str, Any]:
        model = _fresh(protocol, build, width, seed, device, role)
        init = state(model)
        pruned = hooks and masking and task == "A"
        first = start(task) if not pruned else replace(start(task), updates=cfg.updatesPerTask - retrain)
        log = train(model, first, derived_seed(seed, "phase", task), hooks)
        masks = masked_end(model, task, retrain) if pruned else {}
        return {"init": init, "state": state(model), "curve": log.curve, "nanSteps": log.nan_steps,
                "firstLoss": log.first, "lastLoss": log.last,
                "method": method.state_dict() if hooks else {}, **masks}  # fmt: skip

    def masked_end(model: RSSM, task: str, retrain: int) -> dict[str, Any]:
        """PackNet's end of task A: the method's owners (checked), task B's weights set to 0, the retraining."""
        owners = Ownership(2)
        end = TaskEnd(task, 0, training[task], last=False, memory=memory_request)
        declared: dict[str, Any] = {}
        _guarded(model, "ownership", lambda: declared.update(method.ownership(model, end) or {}))
        released = owners.assign(model.named_parameters, declared, 0)
        log = (
            train(model, replace(start(task), updates=retrain), derived_seed(seed, "retrain", task), True)
            if retrain
            else None
        )
        return {"ownership": owners.state_dict(),
                "masking": {"retrainUpdates": retrain, "releasedWeights": released,
                            "retrainLastLoss": log.last if log is not None else None}}  # fmt: skip

    own = method.own_task_a_model
    arch_a = stream if own else "rssm"
    key_a = {**model_key_a, "stage": "phase-A", "arch": arch_a, "ug": dict(method.hyperparameters) if own else None}

    def task_a() -> dict[str, Any]:
        train_a = partial(phase, method.build, "A", True) if own else partial(phase, _plain, "A", False)
        value: dict[str, Any] = cache.get(f"phase-A-{arch_a}", key_a, train_a)[0]
        return value

    def reference_b() -> dict[str, Any]:
        train_b = partial(phase, _plain, "B", False, "reference-B")
        value: dict[str, Any] = cache.get("reference-B-scratch", {**model_key, "stage": "reference-B"}, train_b)[0]
        return value

    # Two runs of one (cell, seed) that start together would both want the shared task-A model first, and the
    # second would wait on the first's lock for a whole training phase: while another run trains it, this one trains
    # the task-B reference (which does not depend on it) first. Every seed is derived, so the order changes no value.
    if cache.busy(key_a):
        ref_b = reference_b()
        stage_a = task_a()
    else:
        stage_a = task_a()
        ref_b = reference_b()
    _check_fingerprint(protocol, family, level.taskA, stage_a.get("firstLoss"))
    if own:
        method.load_state_dict(stage_a.get("method", {}))
    ref_a = (
        cache.get(
            "phase-A-rssm",
            {**model_key, "stage": "phase-A", "arch": "rssm", "ug": None},
            lambda: phase(_plain, "A", False),
        )[0]
        if own
        else stage_a
    )

    def load(build: Callable[[ModelSpec], RSSM], st: dict[str, Any]) -> RSSM:
        m = _fresh(protocol, build, width, seed, device)
        try:
            m.load_state_dict(st)
        except RuntimeError as exc:
            raise TypeError(
                f"the method's build() cannot hold the task-A model ({str(exc).splitlines()[0]}): with "
                "own_task_a_model False its model must take the plain RSSM's state before begin_task"
            ) from None
        m.eval()
        return m

    independent = protocol.model.initialisation == "independent"
    m_init = (
        _fresh(protocol, method.build, width, seed, device, "random-init").eval()
        if independent
        else load(method.build, stage_a["init"])
    )
    m_a = load(method.build, stage_a["state"])
    m_b = load(method.build, stage_a["state"])
    owners = Ownership(2) if "ownership" in stage_a else None
    if owners is not None:
        owners.load_state_dict(stage_a["ownership"])

    def on_a(model: RSSM) -> AbstractContextManager[None]:
        """Task A's evaluations of the task-B model: with task B's weights at 0 for a masking method."""
        return owners.view(model.named_parameters, 0) if owners is not None else nullcontext()

    held_a, held_b = data["A", "heldout"], data["B", "heldout"]
    rows_d = _rows(held_a, ev_cfg.transitions, seed, "D_A")
    disjoint = ev_cfg.fisherSet == "disjoint-from-DA"
    rows_f = _rows(held_a, ev_cfg.fisherTransitions, seed, "fisher", skip=rows_d if disjoint else None)
    frames_a = _rows(held_a, ev_cfg.reconstructionFrames, seed, "recon-A")
    frames_b = _rows(held_b, ev_cfg.reconstructionFrames, seed, "recon-B")
    if method.uses_importance_set and len(rows_f) == 0:
        raise ValueError(
            f"{cell} seed {seed}: the held-out task-A episodes leave no transitions for the importance set "
            f"after D_A ({len(rows_d)} transitions); collect more held-out episodes"
        )
    d_a = ev.encode_transitions(m_a, held_a, rows_d)
    importance = None
    if method.uses_importance_set:
        fset = ev.encode_transitions(m_a, held_a, rows_f)
        importance = ImportanceSet(fset.z, fset.a, fset.z_next)
    end_a = TaskEnd("A", 0, training["A"], last=False, importance=importance, memory=memory_request)
    with _bookkeeping(m_b, counts):
        _guarded(m_b, "end_task", lambda: method.end_task(m_b, end_a))
    log_b = train(m_b, start("B"), derived_seed(seed, "phase", "B", stream), True)
    with _bookkeeping(m_b, counts):
        _guarded(
            m_b, "end_task", lambda: method.end_task(m_b, TaskEnd("B", 1, training["B"], True, memory=memory_request))
        )

    mr_a, mr_b = load(_plain, ref_a["state"]), load(_plain, ref_b["state"])
    ev_seed = derived_seed(seed, "evaluate")
    nll_a_after_a = ev.nll(m_a, d_a, ev_seed)
    with on_a(m_b):
        nll_a_after_b = ev.nll(m_b, d_a, ev_seed)
    nll_a_init = ev.nll(m_init, d_a, ev_seed)
    pf = nll_a_after_b - nll_a_after_a
    with on_a(m_b):
        rd = ev.rollout_divergence(m_a, m_b, d_a, ev_cfg.rdHorizon, ev_cfg.rdStarts, ev_seed)
    alpha, beta, gamma = ev_cfg.wmfWeights
    recon_a_a = ev.reconstruction(m_a, held_a, frames_a)
    with on_a(m_b):
        recon_a_b = ev.reconstruction(m_b, held_a, frames_a)
    recon_b_b = ev.reconstruction(m_b, held_b, frames_b)
    recon_b_scratch = ev.reconstruction(mr_b, held_b, frames_b)
    recon_a_init = ev.reconstruction(m_init, held_a, frames_a)  # the adequacy ratios' denominators
    recon_b_ref_init = ev.reconstruction(load(_plain, ref_b["init"]), held_b, frames_b)
    d_ref = ev.encode_transitions(mr_a, held_a, rows_d)
    d_trans = float(_kl_on(mr_a, mr_b, d_ref))
    physics_pair = level.taskA.env == level.taskB.env and family.renderer != "minigrid"
    metrics: dict[str, Any] = {
        "pf": pf,
        "rd": rd,
        "wmf": alpha * pf + beta * rd,
        "wmfRdShare": _share(alpha * pf, beta * rd),
        "pis": None,
        "ft": recon_b_scratch - recon_b_b,
        "taskAFitGain": nll_a_init - nll_a_after_a,
        "reconAAfterA": recon_a_a,
        "reconAAfterB": recon_a_b,
        "reconBAfterB": recon_b_b,
        "reconBFromScratch": recon_b_scratch,
        "reconARandomInit": recon_a_init,
        "reconBReferenceInit": recon_b_ref_init,
        "encoderDrift": recon_a_b / recon_a_a if recon_a_a > 0 else None,
        "nllAAfterA": nll_a_after_a,
        "nllAAfterB": nll_a_after_b,
        "nllARandomInit": nll_a_init,
        "dParam": ev.d_param(_vec(level.taskA), _vec(level.taskB)) if physics_pair else None,
        "dTrans": d_trans,
        "taskBDifficulty": recon_b_scratch,
        "curves": {"A": stage_a["curve"], "B": log_b.curve},
        "initialReconstructionLossA": stage_a["curve"][0],
        "finalReconstructionLossA": stage_a["curve"][-1],
        "initialReconstructionLossB": log_b.curve[0],
        "finalReconstructionLossB": log_b.curve[-1],
        "firstUpdateReconstructionLossA": stage_a.get("firstLoss"),
        "lastUpdateReconstructionLossA": stage_a.get("lastLoss"),
        "firstUpdateReconstructionLossB": log_b.first,
        "lastUpdateReconstructionLossB": log_b.last,
        "nanStepsA": stage_a["nanSteps"],
        "nanStepsB": log_b.nan_steps,
        "gammaTermEvaluated": gamma is not None,
        "stages": dict(sorted(cache.used.items())),
        "evaluationSizes": {
            "transitionsA": len(rows_d),
            "fisherTransitions": len(rows_f) if method.uses_importance_set else None,
            "framesA": len(frames_a),
            "framesB": len(frames_b),
        },
    }
    extra = method.diagnostics()
    clash = sorted(set(extra) & set(metrics))
    if clash:
        raise ValueError(f"the method's diagnostics() use the suite's metric names {clash}: rename them")
    metrics.update(extra)  # beside the metrics, as records always had them; and as a section the report tabulates
    if "masking" in stage_a:
        metrics["masking"] = stage_a["masking"]
    if extra:
        metrics["methodDiagnostics"] = dict(extra)
    frames_of = {f"data-{split}-{task}": int(d.lengths.sum() + len(d.lengths)) for (task, split), d in data.items()}
    frames = sum(frames_of.values())
    computed = set(cache.used) - {r.split(":", 1)[0] for r in cache.reused}
    trained = [n for n in cache.used if n.startswith(("phase-A-", "reference-B-")) and n in computed]
    budget = {
        "environmentSteps": frames,
        "frames": frames,
        "gradientUpdates": 2 * cfg.updatesPerTask,  # the method's model: task A then task B (the matched budget)
        "updatesExecuted": cfg.updatesPerTask * (1 + len(trained)),  # its task-B phase + the stages it trained
        # earlier tasks' windows in its task-B phase: sampled, drawn from its memory, or charged
        "replaySamples": replayed.get("B", 0) + counts["memoryDraws"] + counts["otherWindows"],
        "framesExecuted": sum(frames_of[n] for n in frames_of if n in computed),
        "parameters": sum(p.numel() for p in m_b.parameters()),  # the final model, every column / expert included
        "samples": {  # frames that reached the encoder in the method's task-B phase, by origin
            "task": own_drawn.get("B", 0) * cfg.sequenceLength,
            "memory": (replayed.get("B", 0) + counts["memoryDraws"]) * cfg.sequenceLength,
            "other": counts["other"],
            "bookkeeping": counts["bookkeeping"],
            "otherPolicy": policy,
        },
    }
    return {"metrics": _clean(metrics), "budget": budget, "reused": sorted(cache.reused)}


@contextmanager
def _bookkeeping(model: RSSM, counts: dict[str, int]) -> Iterator[None]:
    """Count what a method's task-boundary hook passes through the encoder (its bookkeeping: Fisher, anchors)."""
    counter = SampleCounter(model.vae.encoder)
    try:
        with counter.armed():
            yield
    finally:
        counts["bookkeeping"] += counter.bookkeeping
        counter.close()


@torch.no_grad()
def _kl_on(m_p: RSSM, m_q: RSSM, d: ev.LatentSet) -> float:
    """d_trans: mean over D of KL(p_A(z' | z, a) || p_B(z' | z, a)) between the from-scratch models, from h = 0."""
    h_p = m_p.step(m_p.initial(d.z.shape[0], d.z), d.z, d.a)
    h_q = m_q.step(m_q.initial(d.z.shape[0], d.z), d.z, d.a)
    return float(gaussian_kl(*m_p.prior(h_p), *m_q.prior(h_q)).mean())


def _vec(task: TaskRef) -> tuple[float, float, float]:
    g = task.physics.gravity
    return (float(g) if g is not None else float("nan"), task.physics.massScale, task.physics.frictionScale)


def _share(pf_term: float, rd_term: float) -> float | None:
    """Share of WMF's magnitude that comes from RD: |beta RD| / (|alpha PF| + |beta RD|)."""
    total = abs(pf_term) + abs(rd_term)
    return abs(rd_term) / total if total > 0 else None


def _clean(x: Any) -> Any:
    """JSON-safe: floats rounded to 10 significant digits, non-finite floats to None (null = not measured)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float):
        return float(f"{x:.10g}") if np.isfinite(x) else None
    return x
