"""The nav4 environments: four procedurally generated MiniGrid task families on one interface (seed 002).

- Tasks: `goal` (reach the goal), `key` (pick up the key, open the locked door, reach the goal), `hazards`
  (reach the goal without stepping into lava), `combined` (key, locked door and lava).
- One action set for every task: turn left, turn right, forward, pick up, toggle (MiniGrid's actions 0, 1, 2, 3, 5).
- One observation for every task: the full grid re-centred on the agent and rotated to its heading, on a
  (2 * size - 3)^2 wall-padded canvas (fully observed), as uint8 channels: wall, locked door, closed door, open
  door, key, goal, lava, carrying a key, and four task-cue planes (the visible task cue).
- A layout is a pure function of (task, layout seed): generation retries with derived seeds until the layout is
  solvable (breadth-first search over position, heading, key and door state; lava is never entered) and needs at
  least `min_path` actions; `fingerprint` is a stable SHA-256 of task, encoded grid, agent position and heading.
- Reward is MiniGrid's own on reaching the goal; an episode is a success iff it reaches the goal. The training-only
  subgoal bonus lives in the agent, not here.

Registered with gymnasium as `clt/Nav4-<task>-v0` (`gymnasium.make("clt/Nav4-key-v0")`).
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
from minigrid.core.constants import OBJECT_TO_IDX
from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Door, Goal, Key, Lava, WorldObj
from minigrid.minigrid_env import MiniGridEnv

__all__ = [
    "ACTIONS",
    "CHANNELS",
    "TASKS",
    "EgocentricWrapper",
    "Nav4Env",
    "egocentric_obs",
    "fingerprint",
    "grid_planes",
    "layout",
    "register_envs",
    "shortest_solution",
    "solution",
]

TASKS = ("goal", "key", "hazards", "combined")
ACTIONS = (0, 1, 2, 3, 5)  # left, right, forward, pickup, toggle
CHANNELS = (
    "wall",
    "door-locked",
    "door-closed",
    "door-open",
    "key",
    "goal",
    "lava",
    "carrying-key",
    *(f"task-{t}" for t in TASKS),
)
_EMPTY, _WALL, _DOOR, _KEY, _GOAL, _LAVA = 1, 2, 4, 5, 8, 9  # MiniGrid object indices
_DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid headings: right, down, left, up
_ROT = (1, 2, 3, 0)  # np.rot90 turns that bring each heading to "up"


class Nav4Env(MiniGridEnv):
    """One nav4 task family; `reset(seed=s)` builds the layout of layout seed `s`."""

    def __init__(
        self, task: str = "goal", size: int = 9, max_steps: int = 100, min_path: int = 4, **kwargs: Any
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown nav4 task {task!r} (known: {', '.join(TASKS)})")
        self.task = task
        self.min_path = min_path
        self.layout_seed = 0
        self.attempts = 0
        self.solution_length = 0
        super().__init__(
            mission_space=MissionSpace(mission_func=lambda: f"nav4 {task}"),
            grid_size=size,
            max_steps=max_steps,
            see_through_walls=True,
            agent_view_size=3,
            **kwargs,
        )
        canvas = 2 * size - 3
        self.observation_space = gym.spaces.Box(0, 1, shape=(len(CHANNELS), canvas, canvas), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self._cue = np.zeros((len(TASKS), canvas, canvas), dtype=np.uint8)
        self._cue[TASKS.index(task)] = 1

    # -- layout ----------------------------------------------------------------------------------------------
    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.layout_seed = int(seed)
        obs, info = super().reset(seed=seed)
        info.update({"task": self.task, "layoutSeed": self.layout_seed, "solutionLength": self.solution_length})
        return obs, info

    def _gen_grid(self, width: int, height: int) -> None:
        for attempt in range(1000):
            rng = np.random.default_rng([self.layout_seed, attempt, TASKS.index(self.task)])
            grid, pos, heading = _generate(self.task, width, height, rng)
            length = shortest_solution(grid, pos, heading)
            if length is not None and length >= self.min_path:
                self.grid, self.agent_pos, self.agent_dir = grid, pos, heading
                self.attempts, self.solution_length = attempt + 1, length
                return
        raise RuntimeError(f"no solvable {self.task} layout for seed {self.layout_seed} in 1000 attempts")

    # -- interface -------------------------------------------------------------------------------------------
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        obs, reward, terminated, truncated, info = super().step(ACTIONS[int(action)])
        fwd = self.grid.get(*self.agent_pos)
        info["success"] = bool(terminated and fwd is not None and fwd.type == "goal")
        return obs, float(reward), terminated, truncated, info

    def gen_obs(self) -> np.ndarray:
        """The egocentric full-grid observation (replaces MiniGrid's partial view, which is never computed)."""
        return egocentric_obs(self, self._cue)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.task, self.grid.encode(), self.agent_pos, self.agent_dir)


def grid_planes(grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """The object-type and state planes of a MiniGrid grid, indexed [y, x]: the values of `grid.encode()[:, :, 0].T`
    and `[:, :, 2].T`, read from the cell list directly (MiniGrid's encode calls `get` and writes numpy per cell, and
    took a fifth of nav4's training time). Only objects that override `encode` (doors) carry a state."""
    types: list[int] = []
    states: list[int] = []
    for cell in grid.grid:
        if cell is None:
            code = (_EMPTY, 0, 0)
        elif type(cell).encode is WorldObj.encode:
            code = (OBJECT_TO_IDX[cell.type], 0, 0)
        else:
            code = cell.encode()
        types.append(code[0])
        states.append(code[2])
    shape = (grid.height, grid.width)
    return np.array(types, dtype=np.uint8).reshape(shape), np.array(states, dtype=np.uint8).reshape(shape)


def egocentric_obs(env: MiniGridEnv, cue: np.ndarray) -> np.ndarray:
    """The full grid of any MiniGrid environment re-centred on the agent and rotated to its heading, on a wall-padded
    (2 * size - 3)^2 canvas, as the nav4 channels (`cue`: the task-cue planes, shape (4, canvas, canvas))."""
    types, states = grid_planes(env.grid)
    size = max(env.width, env.height)
    canvas = 2 * size - 3
    x, y = env.agent_pos
    obj = np.full((canvas, canvas), _WALL, dtype=np.uint8)
    state = np.zeros((canvas, canvas), dtype=np.uint8)
    ox, oy = size - 2 - x, size - 2 - y
    obj[oy : oy + env.height, ox : ox + env.width] = types
    state[oy : oy + env.height, ox : ox + env.width] = states
    k = _ROT[env.agent_dir]
    obj, state = np.rot90(obj, k), np.rot90(state, k)
    door = obj == _DOOR
    out = np.empty((len(CHANNELS), canvas, canvas), dtype=np.uint8)
    out[0] = obj == _WALL
    out[1] = door & (state == 2)
    out[2] = door & (state == 1)
    out[3] = door & (state == 0)
    out[4] = obj == _KEY
    out[5] = obj == _GOAL
    out[6] = obj == _LAVA
    out[7] = env.carrying is not None and env.carrying.type == "key"
    out[8:] = cue
    return out


class EgocentricWrapper(gym.ObservationWrapper):
    """The nav4 observation for any MiniGrid environment (benchmarks compare environments through it)."""

    def __init__(self, env: gym.Env, task: str = "goal") -> None:
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, MiniGridEnv):
            raise TypeError(f"EgocentricWrapper needs a MiniGrid environment, got {type(base).__name__}")
        self._base = base
        canvas = 2 * max(base.width, base.height) - 3
        self._cue = np.zeros((len(TASKS), canvas, canvas), dtype=np.uint8)
        self._cue[TASKS.index(task)] = 1
        self.observation_space = gym.spaces.Box(0, 1, shape=(len(CHANNELS), canvas, canvas), dtype=np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        return egocentric_obs(self._base, self._cue)


def fingerprint(task: str, encoded: np.ndarray, pos: Any, heading: int) -> str:
    """Stable layout fingerprint: SHA-256 of task, encoded grid bytes, agent position and heading."""
    h = hashlib.sha256()
    h.update(task.encode())
    h.update(np.ascontiguousarray(encoded, dtype=np.uint8).tobytes())
    h.update(f"{int(pos[0])},{int(pos[1])},{int(heading)}".encode())
    return h.hexdigest()


def layout(task: str, seed: int, size: int = 9, min_path: int = 4) -> tuple[str, int]:
    """(fingerprint, shortest solution length) of a layout, without an episode."""
    env = Nav4Env(task, size=size, min_path=min_path)
    env.reset(seed=seed)
    return env.fingerprint, env.solution_length


def _free(
    grid: Grid, width: int, height: int, taken: set[tuple[int, int]], xs: range | None = None
) -> list[tuple[int, int]]:
    cols = xs if xs is not None else range(1, width - 1)
    return [(x, y) for x in cols for y in range(1, height - 1) if grid.get(x, y) is None and (x, y) not in taken]


def _pick(rng: np.random.Generator, cells: list[tuple[int, int]]) -> tuple[int, int]:
    return cells[int(rng.integers(len(cells)))]


def _generate(task: str, width: int, height: int, rng: np.random.Generator) -> tuple[Grid, tuple[int, int], int]:
    grid = Grid(width, height)
    grid.wall_rect(0, 0, width, height)
    taken: set[tuple[int, int]] = set()
    left = right = range(1, width - 1)
    if task in ("key", "combined"):  # a wall with a locked door splits the room; the key is on the agent's side
        split = int(rng.integers(3, width - 3))
        grid.vert_wall(split, 0)
        door_y = int(rng.integers(1, height - 1))
        grid.set(split, door_y, Door("yellow", is_locked=True))
        left, right = range(1, split), range(split + 1, width - 1)
        grid.set(*_pick(rng, _free(grid, width, height, taken, left)), Key("yellow"))
        taken.add((split - 1, door_y))  # keep the door approachable from both sides
        taken.add((split + 1, door_y))
    goal = _pick(rng, _free(grid, width, height, taken, right))
    grid.set(*goal, Goal())
    pos = _pick(rng, _free(grid, width, height, taken | {goal}, left))
    taken.add(pos)
    if task in ("hazards", "combined"):
        n = int(rng.integers(4, 9)) if task == "hazards" else int(rng.integers(2, 5))
        for _ in range(n):
            cells = _free(grid, width, height, taken)
            if cells:
                grid.set(*_pick(rng, cells), Lava())
    return grid, pos, int(rng.integers(4))


def shortest_solution(grid: Grid, pos: tuple[int, int], heading: int) -> int | None:
    """Fewest actions from (pos, heading) to the goal without entering lava; None when unsolvable."""
    plan = solution(grid, pos, heading)
    return None if plan is None else len(plan)


def solution(grid: Grid, pos: tuple[int, int], heading: int) -> list[int] | None:
    """A shortest action sequence (indices into `ACTIONS`: left, right, forward, pickup, toggle) that reaches the
    goal without entering lava, by breadth-first search over position, heading, key carried and door states."""
    types, states = grid_planes(grid)
    types, states = types.T, states.T  # indexed [x, y]
    doors = [(int(x), int(y)) for x, y in zip(*np.nonzero(types == _DOOR), strict=True)]
    keys = [(int(x), int(y)) for x, y in zip(*np.nonzero(types == _KEY), strict=True)]
    obj: list[list[int]] = types.tolist()  # the search reads cells from lists: numpy scalar reads cost 5x more
    start = (pos[0], pos[1], heading, False, tuple(int(states[d]) for d in doors))
    parent: dict[Any, tuple[Any, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        x, y, h, carrying, door_states = current
        dx, dy = _DIRS[h]
        fx, fy = x + dx, y + dy
        front = obj[fx][fy]
        if front == _GOAL:
            plan = [2]
            node: Any = current
            while parent[node] is not None:
                node, action = parent[node]  # type: ignore[misc]
                plan.append(action)
            return plan[::-1]
        door_at = doors.index((fx, fy)) if (fx, fy) in doors else -1
        key_here = (fx, fy) in keys and not carrying
        moves = [((x, y, (h - 1) % 4, carrying, door_states), 0), ((x, y, (h + 1) % 4, carrying, door_states), 1)]
        if front in (1, 3) or (door_at >= 0 and door_states[door_at] == 0) or (front == _KEY and not key_here):
            moves.append(((fx, fy, h, carrying, door_states), 2))
        if key_here:
            moves.append(((x, y, h, True, door_states), 3))
        if door_at >= 0:
            ds = door_states[door_at]
            new = 0 if ds == 1 or (ds == 2 and carrying) else (1 if ds == 0 else ds)
            if new != ds:
                moves.append(((x, y, h, carrying, (*door_states[:door_at], new, *door_states[door_at + 1 :])), 4))
        for nxt, action in moves:
            if nxt not in parent:
                parent[nxt] = (current, action)
                queue.append(nxt)
    return None


def register_envs() -> None:
    """Register `clt/Nav4-<task>-v0` with gymnasium (idempotent)."""
    for task in TASKS:
        env_id = f"clt/Nav4-{task}-v0"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point="cltoolkit.suites.nav4.env:Nav4Env", kwargs={"task": task})


register_envs()
