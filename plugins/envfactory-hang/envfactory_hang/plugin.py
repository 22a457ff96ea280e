"""A plugin module whose import blocks for ``ENVFACTORY_HANG_SECONDS`` (default 3600)."""

from __future__ import annotations

import os
import time

import gymnasium as gym

import envfactory

time.sleep(float(os.environ.get("ENVFACTORY_HANG_SECONDS", "3600")))


def _identity(env: gym.Env) -> gym.Env:
    return env


@envfactory.hookimpl
def envfactory_wrappers() -> list[envfactory.WrapperPlugin]:
    return [envfactory.WrapperPlugin("slow_identity", _identity)]
