"""wmf environments: every family normalized to 64x64x3 uint8 frames, one action vector width per pair, physics
changes applied at runtime, every random source seeded (episode RNG, action sampler, dm_control's task state).

Frames are uint8 in buffers (float32 frames of long collections take gigabytes, MACHINE.md) and become float32 in
[0, 1] only inside a training batch. One family per process: dm_control and MuJoCo rendering contexts conflict."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Episodes", "FrameEnv", "collect", "collect_stream", "make_env"]

SIZE = 64
MINIGRID_ACTIONS = 7


@dataclass
class Episodes:
    """Random-policy episodes of one task: frames (n, T+1, 64, 64, 3) uint8, actions (n, T, width) float32 and the
    number of valid steps per episode (episodes end early on termination; padding is never sampled)."""

    frames: np.ndarray
    actions: np.ndarray
    lengths: np.ndarray

    def windows(self, length: int) -> np.ndarray:
        """(episode, start) of every window of `length` frames inside an episode."""
        import numpy as np

        rows = [(e, s) for e, n in enumerate(self.lengths.tolist()) for s in range(int(n) + 1 - length + 1)]
        return np.asarray(rows, dtype=np.int64).reshape(-1, 2)

    def transitions(self) -> np.ndarray:
        """(episode, t) of every transition (frame t, action t, frame t+1)."""
        return self.windows(2)


def _resize(frame: np.ndarray) -> np.ndarray:
    import numpy as np

    if frame.shape[:2] == (SIZE, SIZE):
        return np.ascontiguousarray(frame, dtype=np.uint8)
    from PIL import Image

    return np.asarray(Image.fromarray(frame).resize((SIZE, SIZE), Image.Resampling.BILINEAR), dtype=np.uint8)


def _rendered(env: Any) -> np.ndarray:
    """A Gymnasium environment's rgb_array frame at 64x64."""
    frame: np.ndarray = env.render()
    return _resize(frame)


class FrameEnv:
    """reset(seed) -> frame; step(action vector) -> (frame, done). The seed's way (`collect_stream`): seed(seed) once,
    then reset() walks the environment's own stream of initial states and stream_action() its own action sampler."""

    width: int

    def reset(self, seed: int) -> np.ndarray:
        raise NotImplementedError

    def seed(self, seed: int) -> None:
        """Seed the episode stream and the action sampler once (WorldModelsBenchmark's `BaseEnv.seed`)."""
        raise NotImplementedError

    def next_episode(self) -> np.ndarray:
        """The next episode's first frame, continuing the stream `seed` started."""
        raise NotImplementedError

    def stream_action(self) -> np.ndarray:
        """A uniform random action from the sampler `seed` seeded."""
        raise NotImplementedError

    def step(self, action: np.ndarray) -> tuple[np.ndarray, bool]:
        raise NotImplementedError

    def sample_action(self, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


class GymnasiumFrames(FrameEnv):
    """A Gymnasium environment (`env`) rendered as RGB frames: reset, seeding and closing as Gymnasium does them."""

    env: Any

    def reset(self, seed: int) -> np.ndarray:
        self.env.reset(seed=seed)
        return _rendered(self.env)

    def seed(self, seed: int) -> None:
        self.env.reset(seed=seed)
        self.env.action_space.seed(seed)

    def next_episode(self) -> np.ndarray:
        self.env.reset()
        return _rendered(self.env)

    def close(self) -> None:
        self.env.close()


class MiniGridFrames(GymnasiumFrames):
    """A MiniGrid task rendered at tile size 8 (or MiniGrid's default 32 with `default_size`) and resized to 64x64
    (no native 64x64 RGB). Actions are one-hot over the 7 MiniGrid actions, so every MiniGrid pair shares one action
    width."""

    width = MINIGRID_ACTIONS

    def __init__(self, env_id: str, default_size: bool = False) -> None:
        import gymnasium as gym
        import minigrid  # noqa: F401 - registers the environments

        size: dict[str, Any] = {} if default_size else {"tile_size": 8}
        self.env = gym.make(env_id, render_mode="rgb_array", **size)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, bool]:
        _, _, terminated, truncated, _ = self.env.step(int(action.argmax()))
        return _rendered(self.env), bool(terminated or truncated)

    def _one_hot(self, index: int) -> np.ndarray:
        import numpy as np

        a = np.zeros(self.width, dtype=np.float32)
        a[index] = 1.0
        return a

    def sample_action(self, rng: np.random.Generator) -> np.ndarray:
        return self._one_hot(int(rng.integers(self.width)))

    def stream_action(self) -> np.ndarray:
        return self._one_hot(int(self.env.action_space.sample()))


def _physics(model: Any, gravity: float | None, mass: float, friction: float, shadows: bool = False) -> None:
    """Runtime physics change on a MuJoCo model (gravity magnitude, every body mass, every friction coefficient),
    and MuJoCo's shadows off unless `shadows`: they make 64x64 rendering about 30x slower (MACHINE.md)."""
    if gravity is not None:
        model.opt.gravity[2] = -abs(gravity)
    model.body_mass[:] = model.body_mass * mass
    model.geom_friction[:] = model.geom_friction * friction
    if not shadows:
        model.vis.quality.shadowsize = 0
        model.vis.quality.offsamples = 0


class GymFrames(GymnasiumFrames):
    """Gymnasium HalfCheetah (MuJoCo) rendered from the `track` camera at 64x64; or, with `default_size`, its
    default 480x480 frame, shadows on, resized: from Gymnasium 1.x's default camera (the free camera, wmf-v2/v3), or
    with `track` too from the `track` camera, which is what gymnasium 0.29.1 (WorldModelsBenchmark's pin) renders
    when no camera is named."""

    def __init__(
        self,
        env_id: str,
        gravity: float | None,
        mass: float,
        friction: float,
        default_size: bool = False,
        track: bool = True,
    ) -> None:
        import gymnasium as gym

        camera: dict[str, Any] = {"camera_name": "track"} if track else {}
        size: dict[str, Any] = {} if default_size else {"width": SIZE, "height": SIZE}
        # HalfCheetah-v4 (WorldModelsBenchmark's version) is "out of date": chosen, not stale
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*is out of date", category=DeprecationWarning)
            self.env = gym.make(env_id, render_mode="rgb_array", **size, **camera)
        _physics(cast(Any, self.env.unwrapped).model, gravity, mass, friction, default_size)  # the MuJoCo model
        space = self.env.action_space
        assert isinstance(space, gym.spaces.Box)
        self.width = int(space.shape[0])
        self.low, self.high = space.low, space.high

    def step(self, action: np.ndarray) -> tuple[np.ndarray, bool]:
        _, _, terminated, truncated, _ = self.env.step(action)
        return _rendered(self.env), bool(terminated or truncated)

    def sample_action(self, rng: np.random.Generator) -> np.ndarray:
        import numpy as np

        action: np.ndarray = rng.uniform(self.low, self.high).astype(np.float32)
        return action

    def stream_action(self) -> np.ndarray:
        import numpy as np

        action: np.ndarray = np.asarray(self.env.action_space.sample(), dtype=np.float32)
        return action


class DmcFrames(FrameEnv):
    """dm_control `domain/task` pixels from camera 0 at 64x64; the task's random state is seeded at every reset."""

    def __init__(self, env_id: str, gravity: float | None, mass: float, friction: float, shadows: bool = False) -> None:
        self.domain, self.task = env_id.split("/")
        self.physics_change = (gravity, mass, friction)
        self.shadows = shadows
        self.env: Any = None
        spec = self._load(0).action_spec()
        self.width = int(spec.shape[0])
        self.low, self.high = spec.minimum, spec.maximum

    def _load(self, seed: int) -> Any:
        from dm_control import suite

        if self.env is not None:
            self.env.close()
        self.env = suite.load(self.domain, self.task, task_kwargs={"random": seed})
        _physics(self.env.physics.model, *self.physics_change, self.shadows)
        return self.env

    def _frame(self) -> np.ndarray:
        return _resize(self.env.physics.render(height=SIZE, width=SIZE, camera_id=0))

    def reset(self, seed: int) -> np.ndarray:
        self._load(seed).reset()
        return self._frame()

    def seed(self, seed: int) -> None:
        import numpy as np

        self._load(seed)  # the task's RandomState seeded once, as WorldModelsBenchmark reseeds it in place
        self.stream_rng = np.random.default_rng(seed)

    def next_episode(self) -> np.ndarray:
        self.env.reset()
        return self._frame()

    def stream_action(self) -> np.ndarray:
        import numpy as np

        action: np.ndarray = self.stream_rng.uniform(self.low, self.high, size=self.low.shape).astype(np.float32)
        return action

    def step(self, action: np.ndarray) -> tuple[np.ndarray, bool]:
        ts = self.env.step(action)
        return self._frame(), bool(ts.last())

    def sample_action(self, rng: np.random.Generator) -> np.ndarray:
        import numpy as np

        action: np.ndarray = rng.uniform(self.low, self.high).astype(np.float32)
        return action

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def make_env(
    renderer: str,
    env_id: str,
    gravity: float | None = None,
    mass: float = 1.0,
    friction: float = 1.0,
    rendering: str = "native-64",
) -> FrameEnv:
    """The frame environment of one task (EGL rendering for the MuJoCo families, set before their import);
    `rendering` "default-resized": each environment's default frame, resized (WorldModelsBenchmark), Gymnasium MuJoCo
    from Gymnasium 1.x's default (free) camera; "track-resized": the same, HalfCheetah from its `track` camera as
    gymnasium 0.29.1 renders it."""
    default = rendering in ("default-resized", "track-resized")
    if renderer == "minigrid":
        return MiniGridFrames(env_id, default)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if renderer == "mujoco":
        return GymFrames(env_id, gravity, mass, friction, default, track=rendering != "default-resized")
    return DmcFrames(env_id, gravity, mass, friction, default)


def _episodes(
    env: FrameEnv, episodes: int, max_steps: int, first: Callable[[int], np.ndarray], action: Callable[[], np.ndarray]
) -> Episodes:
    """`episodes` episodes, each started by `first(e)` and driven by `action()`, cut at `max_steps`."""
    import numpy as np

    frames = np.zeros((episodes, max_steps + 1, SIZE, SIZE, 3), dtype=np.uint8)
    actions = np.zeros((episodes, max_steps, env.width), dtype=np.float32)
    lengths = np.zeros(episodes, dtype=np.int64)
    for e in range(episodes):
        frames[e, 0] = first(e)
        t = 0
        while t < max_steps:
            a = action()
            frame, done = env.step(a)
            actions[e, t] = a
            frames[e, t + 1] = frame
            t += 1
            if done:
                break
        lengths[e] = t
    return Episodes(frames, actions, lengths)


def collect(env: FrameEnv, episodes: int, max_steps: int, seed: int) -> Episodes:
    """`episodes` random-policy episodes, cut at `max_steps`; episode e is reset with a 31-bit seed derived from
    (`seed`, e) and the action sampler is its own generator seeded from `seed`, so two collections of one seed are
    identical."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))

    def first(e: int) -> np.ndarray:
        return env.reset(int(np.random.SeedSequence([seed, e]).generate_state(1)[0] >> 1))

    return _episodes(env, episodes, max_steps, first, lambda: env.sample_action(rng))


def collect_stream(env: FrameEnv, counts: tuple[int, ...], max_steps: int, seed: int) -> tuple[Episodes, ...]:
    """WorldModelsBenchmark's collection (`collect_cell_buffers`, `collect_rollouts`): the environment seeded once with
    `seed` (its episode stream and its action sampler), then `counts[0]` episodes, then `counts[1]`, ... walking that
    one stream (a task's training episodes, then its held-out ones), each cut at `max_steps`."""
    env.seed(seed)
    return tuple(_episodes(env, n, max_steps, lambda _: env.next_episode(), env.stream_action) for n in counts)
