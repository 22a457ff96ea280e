"""Plugins through real discovery: entry points of pip-installed packages under plugins/.

The example plugin is installed in the test environment; the broken / conflict / typo
plugins are installed into temporary folders and exercised in subprocesses (see
``conftest.py``), so none of them can leak into this process.
"""

from __future__ import annotations

import importlib.metadata as md
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory.plugin.manager import get_plugin_manager

# Runs in a subprocess: load the plugins, report the registry, the plugin load warnings,
# and (when asked) step the env an override list describes.
PROBE = r"""
import json, sys, warnings
import envfactory
from envfactory.plugin.manager import get_plugin_manager

out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        reg = envfactory.get_registry()
    except envfactory.PluginConflictError as exc:
        out["conflict"] = str(exc)
    else:
        out["registry"] = reg.as_dict()
        out["plugins"] = sorted(get_plugin_manager().providers)
        rows = out["registry"]["plugins"]
        out["statuses"] = {p["plugin"]: [p["status"], p["detail"]] for p in rows}
        if len(sys.argv) > 1:
            try:
                with envfactory.make_vec(overrides=sys.argv[1:]) as envs:
                    envs.reset(seed=0)
                    envs.step(envs.action_space.sample())
                    out["stepped"] = type(envs).__name__
            except envfactory.ConfigError as exc:
                out["error"] = [type(exc).__name__, str(exc)]
out["warnings"] = [
    str(w.message) for w in caught if issubclass(w.category, envfactory.PluginLoadWarning)
]
print(json.dumps(out))
"""


def probe(run: Any, sites: list[Path], *overrides: str, env: dict[str, str] | None = None) -> Any:
    proc = run(["python", "-c", PROBE, *overrides], pythonpath=sites, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the example plugin (installed in the environment) --------------------------------


def test_example_plugin_is_found_by_its_entry_point(example_version: str) -> None:
    eps = [ep for ep in md.entry_points(group="envfactory") if ep.name == "envfactory_example"]
    assert len(eps) == 1 and eps[0].dist is not None
    assert (eps[0].dist.name, eps[0].value) == ("envfactory-example", "envfactory_example.plugin")

    reg = envfactory.get_registry()
    for table, name in (
        (reg.families, "pendulum"),
        (reg.wrappers, "scale_reward"),
        (reg.vectorizers, "gym-sync"),
    ):
        provider = table[name].provider
        assert (provider.distribution, provider.version, provider.plugin) == (
            "envfactory-example",
            example_version,
            "envfactory_example",
        )
    assert "scale_reward" not in reg.vector_wrappers
    [(conf, provider)] = [(d, p) for d, p in reg.config_dirs if p.distribution != "envfactory"]
    assert Path(conf, "env", "pendulum_moon.yaml").is_file()
    assert provider.distribution == "envfactory-example"
    assert get_plugin_manager().providers["envfactory_example"].version == example_version


def test_available_names_the_example_distribution(example_version: str) -> None:
    avail = envfactory.available()
    given = f"envfactory-example {example_version}"
    assert avail["families"]["pendulum"] == given
    assert avail["wrappers"]["scale_reward"] == given
    assert avail["vectorizers"]["gym-sync"] == given
    assert avail["families"]["gym"] == f"envfactory {md.version('envfactory')}"


def test_plugins_command_json(run: Any, example_version: str) -> None:
    proc = run(["envfactory-plugins", "--json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {
        "plugins",
        "conflicts",
        "families",
        "vectorizers",
        "wrappers",
        "vector_wrappers",
        "config_dirs",
        "failures",
        "disabled",
    }
    for kind, name in (("families", "pendulum"), ("wrappers", "scale_reward")):
        assert data[kind][name]["distribution"] == "envfactory-example"
        assert data[kind][name]["version"] == example_version
    assert data["vectorizers"]["gym-sync"]["plugin"] == "envfactory_example"
    assert data["families"]["gym"]["distribution"] == "envfactory"
    assert "time_limit" in data["wrappers"] and "normalize_reward" in data["vector_wrappers"]
    assert any(
        d["distribution"] == "envfactory-example" and d["path"].endswith("conf")
        for d in data["config_dirs"]
    )
    assert not [f for f in data["failures"] if f["distribution"] == "envfactory-example"]
    plugins = {p["plugin"]: p for p in data["plugins"]}
    example = plugins["envfactory_example"]
    assert (example["distribution"], example["version"], example["status"]) == (
        "envfactory-example",
        example_version,
        "active",
    )
    assert example["registers"]["families"] == ["pendulum"]
    assert "scale_reward" in example["registers"]["wrappers"]
    assert plugins["envfactory.wrappers"]["status"] == "active"
    assert data["conflicts"] == []


def test_plugins_command_table(run: Any, example_version: str) -> None:
    proc = run(["envfactory-plugins"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for title in (
        "Plugins",
        "Env families",
        "Vectorizers",
        "Wrappers",
        "Vector wrappers",
        "Config dirs",
        "Failed plugins",
        "Disabled plugins",
    ):
        assert f"\n{title}" in f"\n{out}"
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert lines["pendulum"][1:3] == ["envfactory-example", example_version]
    assert lines["gym-sync"][1:3] == ["envfactory-example", example_version]
    assert lines["envfactory_example"][1:3] == ["envfactory-example", example_version]
    assert lines["mountaincar"][1] == "envfactory"


def test_pendulum_family_composes_and_steps() -> None:
    cfg = envfactory.compose(["env=pendulum", "env.g=9.81", "num_envs=2"])
    assert (cfg.env.family, cfg.env.g, cfg.env.max_episode_steps) == ("pendulum", 9.81, 200)
    with envfactory.make_vec(cfg) as envs:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 3)
        assert envs.get_attr("g") == (9.81, 9.81)
        obs, rewards, *_ = envs.step(envs.action_space.sample())
        assert obs.shape == (2, 3) and rewards.shape == (2,)


def test_pendulum_preset_from_the_plugin_config_dir() -> None:
    cfg = envfactory.compose(["env=pendulum_moon"])
    assert (cfg.env.family, cfg.env.g, cfg.env.max_episode_steps) == ("pendulum", 1.62, 200)
    cfg = envfactory.compose(["env=pendulum_moon", "env.g=3.7", "num_envs=1"])
    with envfactory.make_vec(cfg) as envs:
        assert envs.get_attr("g") == (3.7,)


def _rewards(overrides: list[str] | dict[str, Any], steps: int = 30) -> np.ndarray:
    if isinstance(overrides, dict):
        envs = envfactory.make_vec(overrides)
    else:
        envs = envfactory.make_vec(overrides=overrides)
    with envs:
        envs.reset(seed=3)
        envs.action_space.seed(3)
        out = [envs.step(envs.action_space.sample())[1] for _ in range(steps)]
    return np.array(out)


def test_scale_reward_wrapper_scales_rewards() -> None:
    base = _rewards(["env=pendulum", "num_envs=2"])
    scaled = _rewards(["env=pendulum", "num_envs=2", "wrappers=[{name:scale_reward,scale:0.5}]"])
    assert np.all(base < 0)  # pendulum rewards are never positive: a no-op would show
    np.testing.assert_allclose(scaled, 0.5 * base)
    as_dict = _rewards(
        {"env": "pendulum", "num_envs": 2, "wrappers": [{"name": "scale_reward", "scale": -2.0}]}
    )
    np.testing.assert_allclose(as_dict, -2.0 * base)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_gym_sync_vectorizer_matches_dummy(mode: str) -> None:
    def trajectory(vectorizer: str) -> tuple[type, list[Any]]:
        overrides = [f"vectorizer={vectorizer}", "num_envs=3", f"autoreset_mode={mode}"]
        with envfactory.make_vec(overrides=overrides) as envs:
            kind = type(envs)
            assert envs.metadata["autoreset_mode"].name == mode.upper()
            steps = [envs.reset(seed=7)[0]]
            actions = gym.spaces.MultiDiscrete([2, 2, 2], seed=7)
            for _ in range(80):
                obs, rew, term, trunc, infos = envs.step(actions.sample())
                ep = infos.get("final_info", infos) if mode == "same_step" else infos
                stats = ep.get("episode_stats")
                lengths = stats["l"][ep["_episode_stats"]] if stats is not None else []
                steps.append((obs, rew, term, trunc, list(lengths)))
        return kind, steps

    kind, sync = trajectory("gym-sync")
    assert issubclass(kind, gym.vector.SyncVectorEnv)
    _, dummy = trajectory("dummy")
    assert sum(len(s[4]) for s in sync[1:]) > 0  # some episodes ended
    for a, b in zip(sync, dummy):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


# -- bad plugins (installed into temporary folders, used in subprocesses only) ---------


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_broken_plugin_reported_by_distribution_and_others_load(
    run: Any, plugin_sites: dict[str, Path], example_version: str
) -> None:
    out = probe(run, [plugin_sites["broken"]], "env=pendulum", "vectorizer=gym-sync")
    failures = {(f["plugin"], f["stage"]): f for f in out["registry"]["failures"]}
    assert set(failures) == {
        ("broken_import", "import"),
        ("broken_hook", "envfactory_env_families"),
    }
    assert all(f["distribution"] == "envfactory-broken" for f in failures.values())
    assert all(f["version"] == "0.0.1" for f in failures.values())
    assert "ImportError" in failures["broken_import", "import"]["error"]
    assert "fancy_simulator" in failures["broken_import", "import"]["error"]
    assert failures["broken_hook", "envfactory_env_families"]["error"] == (
        "RuntimeError: simulator licence server unreachable"
    )
    assert len(out["warnings"]) == 2
    assert all("'envfactory-broken'" in w for w in out["warnings"])
    # everything else still loads, the example plugin included
    families = out["registry"]["families"]
    assert {"gym", "mountaincar", "atari", "pendulum"} <= set(families)
    assert families["pendulum"]["version"] == example_version
    assert out["stepped"] == "GymSyncVectorEnv"
    # only the raising hook is skipped: the plugin's other hook still counts
    assert out["registry"]["wrappers"]["broken_identity"]["distribution"] == "envfactory-broken"


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_name_clash_makes_only_that_name_unusable(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    """envfactory-conflict registers a family 'gym' as the built-in does: 'gym' is
    unusable (one error naming both distributions and how to disable one), everything
    else composes and steps, and the listing shows the conflict."""
    out = probe(run, [plugin_sites["conflict"]], "env=gym")
    kind, msg = out["error"]
    assert kind == "ConflictingNameError" and "\n" not in msg
    assert "the env family 'gym' (at env=gym) is registered by 2 plugins" in msg
    assert f"envfactory {md.version('envfactory')} (plugin 'envfactory.families')" in msg
    assert "envfactory-conflict 0.0.1 (plugin 'conflict')" in msg
    assert "Disable one with ENVFACTORY_DISABLED_PLUGINS=conflict" in msg
    assert "gym" not in out["registry"]["families"]
    [clash] = out["registry"]["conflicts"]
    assert (clash["kind"], clash["name"]) == ("env family", "gym")
    assert [p["distribution"] for p in clash["providers"]] == ["envfactory", "envfactory-conflict"]
    assert out["statuses"]["conflict"] == [
        "conflicting",
        "env family 'gym' with envfactory.families (envfactory)",
    ]
    assert out["statuses"]["envfactory.families"][0] == "conflicting"
    assert out["statuses"]["envfactory_example"] == ["active", ""]
    assert [w for w in out["warnings"] if "registered by 2 plugins" in w] == [clash["error"]]
    # everything else works: another family, the example plugin's vectorizer
    out = probe(run, [plugin_sites["conflict"]], "env=mountaincar", "vectorizer=gym-sync")
    assert out["stepped"] == "GymSyncVectorEnv" and "error" not in out

    sites = [plugin_sites["conflict"]]
    argv = ["envfactory", "run.total_steps=10", "run.progress=false", "hydra.run.dir=out"]
    proc = run(argv, pythonpath=sites)  # the default env is gym: one line, exit 2
    assert proc.returncode == 2, proc.stdout
    [error] = [ln for ln in proc.stderr.splitlines() if ln.startswith("envfactory: error: ")]
    assert "'gym' (at env=gym) is registered by 2 plugins" in error
    assert "envfactory-conflict" in error
    assert "Traceback" not in proc.stderr
    proc = run([*argv, "env=mountaincar"], pythonpath=sites)
    assert proc.returncode == 0, proc.stderr
    listing = run(["envfactory-plugins"], pythonpath=sites)
    assert listing.returncode == 0, listing.stderr
    rows = {ln.split()[0]: ln.split() for ln in listing.stdout.splitlines() if ln.strip()}
    assert rows["conflict"][1:4] == ["envfactory-conflict", "0.0.1", "conflicting"]
    assert "Conflicts (unusable until one plugin is disabled) (1)" in listing.stdout
    assert "envfactory.families (envfactory " in listing.stdout
    data = json.loads(run(["envfactory-plugins", "--json"], pythonpath=sites).stdout)
    assert [c["name"] for c in data["conflicts"]] == ["gym"]


@pytest.mark.parametrize("blocked", ["envfactory-conflict", "conflict", " other , conflict"])
def test_disabled_plugins_env_var_unblocks(
    run: Any, plugin_sites: dict[str, Path], blocked: str
) -> None:
    out = probe(
        run,
        [plugin_sites["conflict"]],
        "env=gym",
        env={"ENVFACTORY_DISABLED_PLUGINS": blocked},
    )
    assert out["registry"]["conflicts"] == []
    assert out["registry"]["disabled"] == ["conflict (envfactory-conflict)"]
    token = next(t.strip() for t in blocked.split(",") if "conflict" in t)
    assert out["statuses"]["conflict"] == ["disabled", f"by ENVFACTORY_DISABLED_PLUGINS={token}"]
    assert out["statuses"]["envfactory.families"] == ["active", ""]
    assert out["registry"]["families"]["gym"]["distribution"] == "envfactory"
    assert out["stepped"] == "DummyVecEnv"
    if "other" in blocked:  # a name that blocks nothing is said once, not silently accepted
        [warning] = out["warnings"]
        assert warning.startswith("ENVFACTORY_DISABLED_PLUGINS names 'other', which is no ")
        assert "conflict" in warning.split("Plugins: ")[1]
    else:
        assert out["warnings"] == []


def test_misspelled_hook_reported_and_plugin_skipped(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    out = probe(run, [plugin_sites["typo"]], "env=gym")
    [failure] = out["registry"]["failures"]
    assert (failure["plugin"], failure["distribution"], failure["stage"]) == (
        "typo",
        "envfactory-typo",
        "registration",
    )
    assert "unknown hook 'envfactory_env_familys'" in failure["error"]
    assert "Did you mean 'envfactory_env_families'?" in failure["error"]
    [warning] = out["warnings"]
    assert "'envfactory-typo'" in warning and "envfactory_env_familys" in warning
    # the whole plugin is skipped (its well-spelled hook too), and nothing else breaks
    assert "typo" not in out["plugins"]
    assert "typo_identity" not in out["registry"]["wrappers"]
    assert "typo_family" not in out["registry"]["families"]
    assert "envfactory_example" in out["plugins"]
    assert out["stepped"] == "DummyVecEnv"


NO_HOOK = (
    "it implements no hook: envfactory_env_families in envfactory_nohook.my_plugin has no "
    "@envfactory.hookimpl decorator. Put @envfactory.hookimpl on the line above each hook "
    "function"
)


def test_a_plugin_without_hookimpl_is_failed_not_active(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    """The plugin guide's family with its ``@envfactory.hookimpl`` line left out (issue 39,
    item 8): pluggy registers the module and finds no hook, so it was listed ``active``
    and registered nothing, in silence."""
    out = probe(run, [plugin_sites["nohook"]], "env=my_pendulum")
    assert out["statuses"]["my_plugin"] == [
        "failed",
        f"in registration: PluginValidationError: {NO_HOOK}",
    ]
    [warning] = out["warnings"]
    assert warning.startswith(
        "envfactory plugin 'my_plugin' from distribution 'envfactory-nohook' 0.0.1 was skipped: "
        f"it failed in registration: PluginValidationError: {NO_HOOK}."
    ), warning
    assert "my_plugin" not in out["plugins"] and "my_pendulum" not in out["registry"]["families"]
    kind, message = out["error"]
    assert kind == "UnknownNameError"
    assert "Install the plugin" not in message
    assert message.endswith(
        "Installed plugins that may provide it were skipped: plugin 'my_plugin' "
        "(envfactory-nohook 0.0.1) failed in registration: PluginValidationError: "
        f"{NO_HOOK}. Fix the plugin (or uninstall it); 'envfactory-plugins' shows each "
        "plugin's status."
    ), message


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_plugin_without_hookimpl_on_the_command_line(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    """As the new user met it: ``envfactory env=my_pendulum`` said "unknown env ... Install
    the plugin that provides it" of an installed plugin, and ``envfactory-plugins`` listed
    it as ``active``."""
    site = [plugin_sites["nohook"]]
    proc = run(["envfactory", "env=my_pendulum", "hydra.run.dir=out"], pythonpath=site)
    assert proc.returncode == 2, proc.stderr
    warning, error = proc.stderr.splitlines()
    assert warning.startswith("envfactory: warning: envfactory plugin 'my_plugin' from ")
    assert NO_HOOK in warning
    assert error.startswith(
        "envfactory: error: unknown env (family or preset) 'my_pendulum' (at env=my_pendulum). "
        "Did you mean 'pendulum'? Valid env (family or preset) names: "
    )
    assert "were skipped: plugin 'my_plugin' (envfactory-nohook 0.0.1) failed in " in error
    listing = run(["envfactory-plugins", "--json"], pythonpath=site)
    assert listing.returncode == 0, listing.stderr
    [row] = [p for p in json.loads(listing.stdout)["plugins"] if p["plugin"] == "my_plugin"]
    assert (row["distribution"], row["status"]) == ("envfactory-nohook", "failed")
    assert NO_HOOK in row["detail"]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_every_bad_plugin_at_once_and_the_cli_still_runs(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    sites = [plugin_sites[name] for name in ("broken", "conflict", "typo")]
    env = {"ENVFACTORY_DISABLED_PLUGINS": "envfactory-conflict"}
    proc = run(
        [
            "envfactory",
            "env=pendulum",
            "num_envs=2",
            "run.total_steps=20",
            "run.progress=false",
            "hydra.run.dir=out",
        ],
        pythonpath=sites,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pendulum" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("envfactory: ")]
    assert len(warnings) == 3, proc.stderr
    assert sum("'envfactory-broken'" in w for w in warnings) == 2
    assert sum("'envfactory-typo'" in w for w in warnings) == 1

    listing = run(["envfactory-plugins"], pythonpath=sites, env=env)
    assert listing.returncode == 0, listing.stderr
    assert "Failed plugins (skipped) (3)" in listing.stdout
    assert "conflict (envfactory-conflict)" in listing.stdout


# -- hostile plugins: sys.exit, bad schemas, impostor names, hangs ----------------------


def test_hostile_plugins_reported_by_distribution_and_skipped(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    out = probe(run, [plugin_sites["hostile"]], "env=pendulum", "vectorizer=gym-sync")
    failures = {(f["plugin"], f["stage"]): f for f in out["registry"]["failures"]}
    # each hostile plugin is one failure, reported once (the wrappers hook included)
    assert sorted(failures) == [
        ("bad_name", "envfactory_env_families"),
        ("bad_schema", "envfactory_env_families"),
        ("bad_wrappers", "envfactory_wrappers"),
        ("exit_hook", "envfactory_env_families"),
        ("exit_import", "import"),
    ]
    assert len(out["registry"]["failures"]) == 5 and len(out["warnings"]) == 5
    assert all(f["distribution"] == "envfactory-hostile" for f in failures.values())
    assert all(f["version"] == "0.0.2" for f in failures.values())
    assert all("'envfactory-hostile' 0.0.2" in w for w in out["warnings"])
    assert failures["exit_import", "import"]["error"] == "SystemExit: 3"
    assert failures["exit_hook", "envfactory_env_families"]["error"] == (
        "SystemExit: exit_hook: no licence, giving up"
    )
    schema_error = failures["bad_schema", "envfactory_env_families"]["error"]
    assert "WavyConfig of 'wavy' is not a valid OmegaConf schema" in schema_error
    assert "complex" in schema_error
    name_error = failures["bad_name", "envfactory_env_families"]["error"]
    assert "ValueError: EnvFamilyPlugin name 'gym\\n' is not valid" in name_error
    # nothing of theirs is registered; everything else works
    families = out["registry"]["families"]
    assert "wavy" not in families and [n for n in families if n.startswith("gym")] == ["gym"]
    assert families["gym"]["distribution"] == "envfactory"
    assert out["stepped"] == "GymSyncVectorEnv"


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_hostile_plugins_do_not_end_the_commands(run: Any, plugin_sites: dict[str, Path]) -> None:
    sites = [plugin_sites["hostile"]]
    argv = ["envfactory", "num_envs=2", "run.total_steps=10", "run.progress=false"]
    proc = run([*argv, "hydra.run.dir=out"], pythonpath=sites)
    assert proc.returncode == 0, proc.stderr
    assert "steps/s" in proc.stdout or "CartPole" in proc.stdout, proc.stdout
    warned = [line for line in proc.stderr.splitlines() if line.startswith("envfactory: ")]
    assert len(warned) == 5 and all("'envfactory-hostile'" in w for w in warned), proc.stderr
    listing = run(["envfactory-plugins"], pythonpath=sites)
    assert listing.returncode == 0, listing.stderr
    assert "Failed plugins (skipped) (5)" in listing.stdout


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_hanging_plugin_is_named_with_how_to_disable_it(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    from envfactory.plugin.manager import SLOW_AFTER_S

    env = {"ENVFACTORY_HANG_SECONDS": str(SLOW_AFTER_S + 2)}
    proc = run(["python", "-c", PROBE, "env=gym"], pythonpath=[plugin_sites["hang"]], env=env)
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if "still importing" in ln]
    assert "plugin 'hang' from distribution 'envfactory-hang' 0.0.3" in line
    assert f"after {SLOW_AFTER_S:g} s" in line
    assert "ENVFACTORY_DISABLED_PLUGINS=hang" in line
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # slow is not broken: once loaded, it counts
    assert out["registry"]["wrappers"]["slow_identity"]["distribution"] == "envfactory-hang"
    assert out["stepped"] == "DummyVecEnv"
    # and disabled, it is not imported at all (no wait, no warning)
    env["ENVFACTORY_DISABLED_PLUGINS"] = "hang"
    proc = run(["python", "-c", PROBE], pythonpath=[plugin_sites["hang"]], env=env, timeout=60)
    assert proc.returncode == 0 and "still importing" not in proc.stderr, proc.stderr


def test_record_names_must_match_whole() -> None:
    for bad in ("gym\n", "gym ", "", "1gym", "gym.x", "gym/x"):
        with pytest.raises(ValueError, match="is not valid: use letters, digits"):
            envfactory.EnvFamilyPlugin(bad, dict)
    assert envfactory.EnvFamilyPlugin("my-gym_2", dict).name == "my-gym_2"


def test_a_schema_field_make_does_not_take_is_refused_at_registration() -> None:
    """A family whose schema has a field its ``make`` does not take registered, and failed
    only when an env was built (``make() got an unexpected keyword argument``)."""
    import dataclasses

    @dataclasses.dataclass
    class Schema:
        family: str = "mine"
        id: str = "CartPole-v1"
        max_stepz: int = 10

    def make(id: str, max_steps: int = 10) -> object:
        return id

    with pytest.raises(TypeError) as info:
        envfactory.EnvFamilyPlugin("mine", make, config=Schema)
    assert str(info.value) == (
        "EnvFamilyPlugin 'mine': config field(s) max_stepz are not parameters of make (it "
        "takes id, max_steps); add them to make's parameters (or **kwargs) or remove them "
        "from the schema"
    )

    def make_any(**options: object) -> object:
        return options

    assert envfactory.EnvFamilyPlugin("mine", make_any, config=Schema).config is Schema


# -- the hookspec docstring examples run as written -------------------------------------


def _spec_examples() -> dict[str, str]:
    import inspect
    import textwrap

    from envfactory.plugin import spec

    out = {}
    for name in ("envfactory_env_families", "envfactory_vectorizers", "envfactory_wrappers"):
        doc = inspect.getdoc(getattr(spec, name)) or ""
        body = doc.split("Example plugin", 1)[1].split("\n\n", 1)[1]
        lines = []
        for line in body.splitlines():
            if line and not line.startswith("    "):
                break
            lines.append(line)
        out[name] = textwrap.dedent("\n".join(lines))
    return out


@pytest.mark.parametrize("hook", sorted(_spec_examples()))
def test_hookspec_example_runs_as_written(hook: str, tmp_path: Path) -> None:
    import importlib.util
    import sys

    from envfactory.plugin.manager import Provider

    path = tmp_path / f"doc_{hook}.py"
    path.write_text(_spec_examples()[hook])
    modspec = importlib.util.spec_from_file_location(path.stem, path)
    assert modspec is not None and modspec.loader is not None
    module = importlib.util.module_from_spec(modspec)
    sys.modules[path.stem] = module  # cloudpickle pickles its functions by value anyway
    try:
        modspec.loader.exec_module(module)
        pm = get_plugin_manager()
        pm.register_plugin(module, Provider(path.stem, "docs", "0"))
        from envfactory.config import store

        store._root_for[0] = None  # the registry below is new
        envfactory.plugin.manager._state.pop("registry", None)
        reg = envfactory.get_registry()
        assert not reg.failures
        overrides = {
            "envfactory_env_families": ["env=doc_pendulum", "env.g=9.81"],
            "envfactory_vectorizers": ["vectorizer=doc-sync", "autoreset_mode=same_step"],
            "envfactory_wrappers": ["wrappers=[{name: doc_scale_reward, scale: 0.5}]"],
        }[hook]
        with envfactory.make_vec(overrides=[*overrides, "num_envs=2"]) as envs:
            envs.reset(seed=0)
            envs.step(envs.action_space.sample())
    finally:
        sys.modules.pop(path.stem, None)
        envfactory.reset_plugins()


def test_register_plugin_in_process() -> None:
    import doctest

    from envfactory.plugin import in_code

    finder = doctest.DocTestFinder()
    [test] = [t for t in finder.find(in_code) if t.name == f"{in_code.__name__}.register_plugin"]
    result = doctest.DocTestRunner().run(test)
    assert result.failed == 0 and result.attempted > 0

    def make(**options: Any) -> gym.Env:
        return gym.make("CartPole-v1")

    assert envfactory.register_plugin(envfactory.EnvFamilyPlugin("nb_family", make)) == "nb_family"
    assert envfactory.compose(["env=nb_family"]).env.family == "nb_family"
    assert envfactory.get_registry().families["nb_family"].provider.distribution == (
        "<registered in code>"
    )
    # duplicates are refused, naming both, and leave the registry as it was
    with pytest.raises(envfactory.PluginConflictError, match="env family 'gym'"):
        envfactory.register_plugin(envfactory.EnvFamilyPlugin("gym", make), name="again")
    with pytest.raises(envfactory.PluginConflictError, match="already registered"):
        envfactory.register_plugin(envfactory.EnvFamilyPlugin("nb_family", make))
    assert envfactory.get_registry().families["gym"].provider.distribution == "envfactory"
    with envfactory.make_vec(overrides=["env=nb_family", "num_envs=2"]) as envs:
        assert envs.reset(seed=0)[0].shape == (2, 4)


# -- start-up: nothing heavy until it is used ------------------------------------------

HEAVY = ("torch", "jax", "array_api_compat")

NO_HEAVY_PROBE = r"""
import json, sys
import envfactory
reg = envfactory.get_registry()
with envfactory.make_vec(overrides=["num_envs=2", "vectorizer=subproc"]) as envs:
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
print(json.dumps({
    "imported": [m for m in HEAVY if m in sys.modules],
    "lazy": sorted(n for n, r in reg.wrappers.items() if "imported on use" in r.record.summary),
    "vector_lazy": sorted(
        n for n, r in reg.vector_wrappers.items() if "imported on use" in r.record.summary
    ),
}))
"""


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_make_vec_imports_neither_torch_nor_jax(run: Any) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip(
            "torch is not installed, so nothing could import it; the check needs it: "
            "pip install torch==2.13.0"
        )
    code = f"HEAVY = {HEAVY!r}\n{NO_HEAVY_PROBE}"
    proc = run(["python", "-c", code])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["imported"] == [], f"make_vec of CartPole imported {out['imported']}"
    # gymnasium's torch/jax wrappers are still registered by name (their classes unloaded)
    assert {"numpy_to_torch", "jax_to_numpy", "jax_to_torch"} <= set(out["lazy"])
    assert {"numpy_to_torch", "jax_to_numpy"} <= set(out["vector_lazy"])


def test_lazy_wrapper_schema_is_checked_at_compose_time() -> None:
    """A lazily loaded wrapper's options are checked when a config names it: an unknown
    option gets the valid ones (its class imported), or, without its optional
    dependency, one line naming what to install."""
    import importlib.util

    torch_ok = all(importlib.util.find_spec(m) for m in ("torch", "array_api_compat"))
    bad = ["wrappers=[{name: numpy_to_torch, devic: cpu}]"]
    if torch_ok:
        with pytest.raises(envfactory.ConfigError, match=r"Did you mean 'device'\?"):
            envfactory.compose(bad)
        cfg = envfactory.compose(["wrappers=[{name: numpy_to_torch, device: cpu}]"])
        with envfactory.make_vec(cfg) as envs:
            envs.reset(seed=0)
    else:
        with pytest.raises(envfactory.ConfigError) as info:
            envfactory.compose(bad)
        msg = str(info.value)
        assert msg.startswith("wrappers[0].name=numpy_to_torch: gymnasium's NumpyToTorch")
        assert "pip install" in msg and "\n" not in msg
    # jax is never installed here: its wrapper says so in one line, at compose time
    if importlib.util.find_spec("jax") is None:
        with pytest.raises(envfactory.ConfigError, match=r"^wrappers\[0\].name=jax_to_numpy: "):
            envfactory.compose(["wrappers=[{name: jax_to_numpy}]"])


# -- hooks go through pluggy's own call path --------------------------------------------


class _FilteringWrapper:
    """A plugin with a new-style pluggy hook wrapper around ``envfactory_wrappers``: it
    drops ``clip_reward`` and adds a record of its own."""

    @envfactory.hookimpl(wrapper=True)
    def envfactory_wrappers(self) -> Any:
        results = yield
        kept = [[r for r in recs if r.name != "clip_reward"] for recs in results]
        return [*kept, [envfactory.WrapperPlugin("added_by_wrapper", lambda env: env)]]


class _RaisingWrapper:
    @envfactory.hookimpl(wrapper=True)
    def envfactory_vectorizers(self) -> Any:
        yield
        raise RuntimeError("wrapper broke")


def test_hooks_are_called_once_through_pluggy_with_tracing_and_hook_wrappers() -> None:
    pm = get_plugin_manager()
    lines: list[str] = []
    pm.trace.root.setwriter(lines.append)
    undo = pm.enable_tracing()
    try:
        envfactory.register_plugin(_FilteringWrapper(), name="filtering")
    finally:
        undo()
        pm.trace.root.setwriter(None)
    called = [ln.strip() for ln in lines if ln.strip().startswith("envfactory_")]
    for hook in ("envfactory_env_families", "envfactory_vectorizers", "envfactory_wrappers"):
        assert sum(ln.startswith(f"{hook} [hook]") for ln in called) == 1, called
    reg = envfactory.get_registry()
    assert "clip_reward" not in reg.wrappers and "clip_reward" not in reg.vector_wrappers
    assert reg.wrappers["added_by_wrapper"].provider.plugin == "filtering"
    # what the wrapper passed through keeps its own plugin
    assert reg.wrappers["time_limit"].provider.plugin == "envfactory.wrappers"
    assert reg.wrappers["scale_reward"].provider.distribution == "envfactory-example"
    cfg = envfactory.compose(["wrappers=[{name: added_by_wrapper}]"])
    with envfactory.make_vec(cfg) as envs:
        envs.reset(seed=0)

    # a hook wrapper that raises is reported and skipped; the hook's results still count
    with pytest.warns(envfactory.PluginLoadWarning, match="'raising'.*wrapper broke"):
        envfactory.register_plugin(_RaisingWrapper(), name="raising")
    reg = envfactory.get_registry()
    assert {"dummy", "subproc", "gym-sync"} <= set(reg.vectorizers)
    [failure] = [f for f in reg.failures if f.provider.plugin == "raising"]
    assert failure.stage == "envfactory_vectorizers (hook wrapper)"
    assert {p.provider.plugin: p.status for p in reg.plugins}["raising"] == "failed"


def test_disabled_plugins_use_pluggys_block_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVFACTORY_DISABLED_PLUGINS", "envfactory-example")
    envfactory.reset_plugins()
    pm = get_plugin_manager()
    assert pm.is_blocked("envfactory_example") and not pm.has_plugin("envfactory_example")
    reg = envfactory.get_registry()
    assert "pendulum" not in reg.families and "gym" in reg.families
    statuses = {p.provider.plugin: (p.status, p.detail) for p in reg.plugins}
    assert statuses["envfactory_example"] == (
        "disabled",
        "by ENVFACTORY_DISABLED_PLUGINS=envfactory-example",
    )
    with pytest.raises(envfactory.UnknownNameError, match="unknown env"):
        envfactory.compose(["env=pendulum"])


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_removed_plugins_vectorizer_is_one_line_with_choices(run: Any) -> None:
    """After a plugin is uninstalled (or disabled) its names give envfactory's one line
    (valid names, did you mean), not Hydra's multi-line "Could not find"."""
    env = {"ENVFACTORY_DISABLED_PLUGINS": "envfactory-gymnasium"}
    for argv in (
        ["envfactory", "vectorizer=gymnasium-async"],
        ["envfactory", "-m", "vectorizer=gymnasium-async", "hydra.sweep.dir=sweep"],
    ):
        proc = run(argv, env=env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        [line] = [ln for ln in proc.stderr.splitlines() if not ln.startswith("envfactory: warn")]
        assert line.startswith("envfactory: error: unknown vectorizer 'gymnasium-async'"), line
        valid = line.split("Valid vectorizer names: ", 1)[1]
        assert "dummy" in valid and "subproc" in valid and "gymnasium-async" not in valid, line
        assert "Could not find" not in line


# -- register_plugin: bad input, re-runs (issue 18) ----------------------------------------


def _make_cartpole(**options: Any) -> gym.Env:
    return gym.make("CartPole-v1")


@pytest.mark.parametrize(
    ("plugin", "what"),
    [
        (None, "got None:"),
        (42, "got int 42:"),
        ("x", "got str 'x':"),
        ({}, "got dict {}:"),
        ([], "got an empty list:"),
        ("record+junk", "got a list whose item 1 is str 'junk', not a record"),
        (object(), "which has no @envfactory.hookimpl functions"),
    ],
    ids=["None", "42", "str", "dict", "empty-list", "record-and-junk", "object"],
)
def test_register_plugin_refuses_what_is_no_plugin(plugin: Any, what: str) -> None:
    if plugin == "record+junk":
        plugin = [envfactory.EnvFamilyPlugin("nb_junk", _make_cartpole), "junk"]
    before = envfactory.available()
    with pytest.raises(TypeError) as err:
        envfactory.register_plugin(plugin)
    assert str(err.value).startswith("register_plugin() ") and what in str(err.value)
    assert envfactory.available() == before  # nothing registered, nothing left behind
    assert "nb_junk" not in {p for p, _ in get_plugin_manager().list_name_plugin()}


def test_register_plugin_again_same_object_is_a_no_op_and_a_new_one_points_to_reset() -> None:
    record = envfactory.EnvFamilyPlugin("nb_rerun", _make_cartpole)
    assert envfactory.register_plugin(record) == "nb_rerun"
    assert envfactory.register_plugin(record) == "nb_rerun"  # a re-run cell: no error
    assert envfactory.register_plugin([record]) == "nb_rerun"
    again = envfactory.EnvFamilyPlugin("nb_rerun", _make_cartpole)  # the cell defines it anew
    with pytest.raises(envfactory.PluginConflictError) as err:
        envfactory.register_plugin(again)
    assert str(err.value) == (
        "a plugin named 'nb_rerun' is already registered in this process (in code), and this "
        "is another object (a cell that defines its records again makes new ones); call "
        "envfactory.reset_plugins() first to forget the plugins registered in code, then "
        "register again"
    )
    with pytest.raises(envfactory.PluginConflictError) as err:  # what the user tries next
        envfactory.register_plugin(again, name="nb_rerun_2")
    msg = str(err.value)
    assert "env family 'nb_rerun' is registered by 2 plugins" in msg
    assert "envfactory.reset_plugins()" in msg
    assert "ENVFACTORY_DISABLED_PLUGINS" not in msg and "uninstall" not in msg
    envfactory.reset_plugins()
    assert envfactory.register_plugin(again) == "nb_rerun"  # what the errors said works


def _unknown_with_disabled(monkeypatch: pytest.MonkeyPatch, disabled: str, env: str) -> str:
    """The message of ``compose(["env=<env>"])`` with ``disabled`` plugins disabled."""
    monkeypatch.setenv("ENVFACTORY_DISABLED_PLUGINS", disabled)
    envfactory.reset_plugins()
    with pytest.raises(envfactory.UnknownNameError) as err:
        envfactory.compose([f"env={env}"])
    return str(err.value)


def test_a_name_of_a_disabled_builtin_plugin_says_it_is_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msg = _unknown_with_disabled(monkeypatch, "envfactory.families", "gym")
    assert msg.startswith(
        "the env (family or preset) 'gym' (at env=gym) is disabled: plugin "
        "'envfactory.families' (envfactory), which registers it, is disabled by "
        "ENVFACTORY_DISABLED_PLUGINS=envfactory.families. Remove envfactory.families from "
        "ENVFACTORY_DISABLED_PLUGINS to use it. Valid env (family or preset) names now: "
    )
    # the presets of the disabled atari family are not offered
    assert "pong" not in msg and "breakout" not in msg and "pendulum" in msg
    with pytest.raises(envfactory.UnknownNameError, match=r"'mountaincar'.* is disabled: "):
        envfactory.get_registry().family("mountaincar")


def test_a_name_no_plugin_has_names_the_disabled_third_party_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msg = _unknown_with_disabled(monkeypatch, "envfactory_example", "pendulum")
    assert msg.startswith("unknown env (family or preset) 'pendulum' (at env=pendulum).")
    assert msg.endswith(
        "Disabled plugins, which may provide it: envfactory_example (envfactory-example, by "
        "ENVFACTORY_DISABLED_PLUGINS=envfactory_example)."
    )
    assert "pendulum_moon" not in msg  # its preset needs the disabled family


def test_replace_hookimpl_function_against_the_installed_pluggy() -> None:
    """The one private reach into pluggy (``HookImpl.function``), in ``_compat``: the
    replacement is what pluggy's normal call path calls."""
    import pluggy

    from envfactory import _compat

    pm = pluggy.PluginManager("compat_probe")

    class Spec:
        @pluggy.HookspecMarker("compat_probe")
        def compat_probe_hook(self) -> int:  # type: ignore[empty-body]
            ...

    class Impl:
        @pluggy.HookimplMarker("compat_probe")
        def compat_probe_hook(self) -> int:
            return 1

    pm.add_hookspecs(Spec)
    pm.register(Impl())
    [impl] = pm.hook.compat_probe_hook.get_hookimpls()
    assert pm.hook.compat_probe_hook() == [1]
    _compat.replace_hookimpl_function(impl, lambda: 2)
    assert pm.hook.compat_probe_hook() == [2]


def test_the_listing_names_a_disabled_plugin_that_is_not_installed(run: Any) -> None:
    env = {"ENVFACTORY_DISABLED_PLUGINS": "envfactory_exampel"}
    listing = run(["envfactory-plugins"], env=env)
    assert listing.returncode == 0, listing.stderr
    section = listing.stdout.split("Disabled plugins (ENVFACTORY_DISABLED_PLUGINS) (0)")[1]
    note = "ENVFACTORY_DISABLED_PLUGINS names 'envfactory_exampel', which is no installed"
    assert note in section and "Did you mean 'envfactory_example'?" in section
    assert note in listing.stderr  # also said where a script reading the JSON sees it
    as_json = run(["envfactory-plugins", "--json"], env=env)
    assert json.loads(as_json.stdout)["disabled"] == [] and note in as_json.stderr


def test_every_builtin_schema_is_a_valid_omegaconf_schema() -> None:
    """The registry skips the OmegaConf check of envfactory's own records at start-up (issue
    28, start-up); this is that check, for every built-in family, vectorizer and wrapper
    (gymnasium's wrappers' schemas are derived from the installed gymnasium)."""
    from envfactory.plugin.manager import _own, _schema_problem

    reg = envfactory.get_registry()
    own = [
        r
        for table in (reg.families, reg.vectorizers, reg.wrappers, reg.vector_wrappers)
        for r in table.values()
        if _own(r.provider)
    ]
    assert len(own) > 40, len(own)  # the built-ins, gymnasium's wrappers included
    for r in own:
        assert _schema_problem(r.record) is None, r.record.name
