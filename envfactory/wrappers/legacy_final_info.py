"""``legacy_final_info``: gymnasium 0.29's ``final_observation`` / ``final_info`` infos.

Code written for gymnasium 0.29 (CleanRL's scripts, most tutorials) reads the last
observation and info of a finished episode from the step's infos:

    for info in infos["final_info"]:                 # an object array: a dict or None
        if info and "episode" in info: ...
    real_next_obs[idx] = infos["final_observation"][idx]

gymnasium 1.x's ``same_step`` autoreset keeps the same data under other shapes
(``infos["final_obs"]``, and ``infos["final_info"]`` as a dict of batched arrays), so that
code prints nothing or raises ``KeyError: 'final_observation'``. This vector wrapper turns
the 1.x shape back into 0.29's, for ``autoreset_mode=same_step`` only:

    envfactory.make_vec(overrides=["autoreset_mode=same_step",
                                   "vector_wrappers=[{name: legacy_final_info}]"])

What a step's infos hold then, as gymnasium 0.29's ``SyncVectorEnv`` gave them:

- ``final_observation``: an object array of ``num_envs``, the final observation of each
  env whose episode ended this step and ``None`` elsewhere; ``_final_observation`` its
  bool mask.
- ``final_info``: an object array of ``num_envs``, the final step's info dict of each env
  that ended (``{"episode": {...}}`` with gymnasium's ``RecordEpisodeStatistics``) and
  ``None`` elsewhere; ``_final_info`` its bool mask.
- every other key as before (for an env that ended: the info of its reset, as 0.29).

1.x's ``final_obs`` / ``_final_obs`` are removed: one spelling per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from ..errors import ConfigError
from ..plugin.types import WrapperPlugin

__all__ = ["RECORD", "LegacyFinalInfo", "LegacyFinalInfoConfig", "unbatch_info"]


@dataclass
class LegacyFinalInfoConfig:
    """``legacy_final_info`` takes no options."""


def unbatch_info(batched: dict[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s info dict out of a vector env's batched infos (the inverse of
    ``VectorEnv._add_info``): the keys whose ``_key`` mask is set for ``i``, nested dicts
    unbatched the same way.

    Example:
        >>> import numpy as np
        >>> unbatch_info({"x": np.array([1, 2]), "_x": np.array([False, True])}, 1)
        {'x': np.int64(2)}
    """
    out: dict[str, Any] = {}
    for key, value in batched.items():
        if key.startswith("_"):
            continue
        mask = batched.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = unbatch_info(value, i) if isinstance(value, dict) else value[i]
    return out


class LegacyFinalInfo(VectorWrapper):
    """gymnasium 0.29's ``final_observation`` / ``final_info`` infos over a ``same_step``
    vector env (see the module docstring).

    Raises:
        ConfigError: the env's ``metadata["autoreset_mode"]`` is not ``same_step``.
    """

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        mode = env.metadata.get("autoreset_mode")
        if mode is not AutoresetMode.SAME_STEP and mode != AutoresetMode.SAME_STEP.value:
            shown = mode.name.lower() if isinstance(mode, AutoresetMode) else mode
            raise ConfigError(
                "vector wrapper legacy_final_info needs autoreset_mode=same_step (it rebuilds "
                "gymnasium 0.29's final_observation/final_info from same_step's final_obs/"
                f"final_info), got autoreset_mode={shown}: add the override "
                "autoreset_mode=same_step"
            )

    def __enter__(self) -> LegacyFinalInfo:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env; move ``final_obs`` / ``final_info`` into 0.29's object arrays."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return obs, rewards, terminations, truncations, self._legacy(infos)

    def _legacy(self, infos: dict[str, Any]) -> dict[str, Any]:
        if "final_obs" not in infos:
            return infos
        n = self.num_envs
        mask = np.asarray(infos.pop("_final_obs"), dtype=np.bool_)
        final_obs = infos.pop("final_obs")
        batched_info = infos.pop("final_info", {})
        infos.pop("_final_info", None)
        observations = np.full(n, None, dtype=object)
        final_infos = np.full(n, None, dtype=object)
        for i in np.flatnonzero(mask):
            observations[i] = final_obs[i]
            final_infos[i] = unbatch_info(batched_info, int(i))
        infos["final_observation"], infos["_final_observation"] = observations, mask
        infos["final_info"], infos["_final_info"] = final_infos, mask.copy()
        return infos


RECORD = WrapperPlugin(
    "legacy_final_info",
    LegacyFinalInfo,
    LegacyFinalInfoConfig,
    vector=True,
    summary="gymnasium 0.29's final_observation/final_info infos (autoreset_mode=same_step)",
)
"""The registration record, returned by envfactory's built-in ``envfactory_wrappers``."""
