"""Structured-config schemas of the top level (the ``envfactory`` node and the CLI job).

Family, vectorizer and wrapper schemas come from their plugin records
(`envfactory.plugin.types`); `envfactory.config.store` puts them all in Hydra's
ConfigStore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional


class AutoresetMode(Enum):
    """When a finished sub-environment is reset (gymnasium's ``AutoresetMode`` values)."""

    next_step = "next_step"
    same_step = "same_step"
    disabled = "disabled"


class Seeding(Enum):
    """How an int seed is spread over envs: ``offset`` gives env i ``seed + i``
    (gymnasium's convention); ``spawn`` gives independent ``SeedSequence.spawn`` streams."""

    offset = "offset"
    spawn = "spawn"


class Job(Enum):
    """What the ``envfactory`` command does: ``rollout`` (measure steps/s) or ``render``
    (write a tiled PNG and an MP4 of the envs' frames)."""

    rollout = "rollout"
    render = "render"


class Policy(Enum):
    """Action policy of the main job's rollout."""

    random = "random"
    noop = "noop"


@dataclass
class RunConfig:
    """Options of the ``envfactory`` command's rollout.

    Attributes:
        total_steps: env steps to run, summed over envs.
        policy: ``random`` (sample the action space) | ``noop`` (action 0 / zeros).
        progress: show a progress bar.
        job: ``rollout`` (measure steps/s) | ``render`` (``env.render_mode=rgb_array``
            forced; ``render.png``, every env's frame tiled, and ``render.mp4`` in the run
            dir); ``job=render`` is short for ``run.job=render``.
        render_steps: the render job's vector steps: the PNG shows the frames after
            ``reset(seed)`` and this many steps, the MP4 one frame per step.
        fps: frames per second of the render job's MP4.
    """

    total_steps: int = 2000
    policy: Policy = Policy.random
    progress: bool = True
    job: Job = Job.rollout
    render_steps: int = 60
    fps: int = 30


@dataclass
class EnvfactoryConfig:
    """The ``envfactory`` node: everything [`envfactory.make_vec`][envfactory.make_vec] needs.

    Attributes:
        env: the env node (``env=<family>``); its ``family`` field names the family.
        vectorizer: the vectorizer node (``vectorizer=<name>``); its ``name`` field.
        num_envs: number of sub-environments (>= 1).
        seed: the seed the main job resets with (``reset(seed=seed)``); null = random.
        autoreset_mode: ``next_step`` | ``same_step`` | ``disabled``.
        seeding: ``offset`` (env i gets seed+i) | ``spawn`` (SeedSequence.spawn streams).
        wrappers: per-env wrappers applied in order:
            ``[{name: time_limit, max_episode_steps: 500}]``. An entry may also be a
            bare name, ``[record_episode_statistics]``: ``{name: <it>}``, its defaults.
        vector_wrappers: wrappers of the VectorEnv applied in order, same forms.
        episode_stats_key: the info key of envfactory's own episode statistics
            (``infos[key]["r"|"l"|"t"]`` with the ``_<key>`` mask); null turns them off.
            gymnasium's ``"episode"`` key is left to its own ``RecordEpisodeStatistics``.
        run: options of the ``envfactory`` command's rollout (``make_vec`` ignores it).
    """

    env: Any = None
    vectorizer: Any = None
    num_envs: int = 4
    seed: Optional[int] = None  # noqa: UP045
    autoreset_mode: AutoresetMode = AutoresetMode.next_step
    seeding: Seeding = Seeding.offset
    wrappers: list[Any] = field(default_factory=list)  # {name: ..., <options>} or a name
    vector_wrappers: list[Any] = field(default_factory=list)
    episode_stats_key: Optional[str] = "episode_stats"  # noqa: UP045
    run: RunConfig = field(default_factory=RunConfig)
