"""Seam: torch's config stores (``torch._dynamo.config``, ``torch._inductor.config``, ``torch._functorch.config``).

A repro must carry the non-default compiler config a failure needs. torch's
``ConfigModule`` keeps each key's default in ``_config[key].default`` and lists the
keys that do not change what gets compiled in ``_compile_ignored_keys``; ``_get_dict``
reads the current values. Reading and patching config by attribute
(``torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY``) is public.

replay/ also records the shape-environment and ``torch.compiler`` stores
(:data:`REPLAY_MODULES`), and watches one key being set (:func:`when_set`: the
``replay_record_enabled`` switch). Every write, ``config.x = v`` as well as
``config.patch(x=v)``, goes through the module's ``__setattr__``, which lives on a class
of that one module's own.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch.utils._config_module.ConfigModule (_get_dict, _compile_ignored_keys, _config[k].default and"
    " .env_value_force, __setattr__,"
    " values kept in ContextVars)",
    features=(
        "config carried into repros",
        "replay record (non-default config)",
        "replay_record_enabled switch",
        "reading a repro leaves the reader's config alone",
    ),
)

#: The config modules whose non-default values a repro carries.
MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")

#: What a replay record carries: those, and the stores of ShapeEnv and torch.compiler.
REPLAY_MODULES = (*MODULES, "torch.fx.experimental._config", "torch.compiler.config")

#: Keys whose torch default is itself read from the environment when torch is imported,
#: outside the env vars torch's config knows (so ``_get_dict`` calls any value the
#: default). ``error_on_custom_op_aliasing`` defaults to ``bool(os.getenv("CI"))``: under
#: ``CI=1`` a custom op whose output aliases its input raises, elsewhere it warns. Their
#: value is always carried, and never minimized away: a repro made on a CI machine then
#: fails the same way on the engineer's laptop, and one made on a laptop the same way in CI.
ENVIRONMENT_DEFAULTS: dict[str, tuple[str, ...]] = {
    "torch._functorch.config": ("error_on_custom_op_aliasing",),
}

#: Keys the reducer never drops from a case: the environment defaults above, and the switch that
#: turns torch's compile caches off for a program that patched torch (their keys do not hash a
#: patched lowering, so a warm cache hides the failure: :meth:`minifier.capture.patches.ProgramState.applied_to`).
NEVER_DROPPED: dict[str, tuple[str, ...]] = {
    **ENVIRONMENT_DEFAULTS,
    "torch._inductor.config": ("force_disable_caches",),
}

#: Keys that narrow what Inductor's autotuner picks from (``max_autotune_gemm_backends="CPP"``), and the
#: switches that make it autotune. While a switch stays in a case, so do these: a failure in one pick
#: needs the program's list, or its repro fails only when the timings pick it (the reducer's one failing
#: query is not a verdict on that). Dropped only with the switches.
AUTOTUNE_SWITCHES: dict[str, tuple[str, ...]] = {"torch._inductor.config": ("max_autotune", "max_autotune_gemm")}
AUTOTUNE_CHOICES: dict[str, tuple[str, ...]] = {
    "torch._inductor.config": (
        "max_autotune_gemm_backends",
        "max_autotune_conv_backends",
        "max_autotune_conv_bwd_weight_backends",
        "max_autotune_conv_bwd_input_backends",
    ),
}

#: Keys that change only what happens to custom ops (torch's aliasing check skips its
#: own ops): a graph calling no custom op does not carry them, and costs no query to drop them.
CUSTOM_OP_KEYS: dict[str, tuple[str, ...]] = {
    "torch._functorch.config": ("check_custom_op_aliasing", "error_on_custom_op_aliasing"),
}


def probe() -> None:
    import inspect

    from torch.utils._config_module import ConfigModule

    if "config.__setattr__(k, v)" not in inspect.getsource(ConfigModule.patch):
        raise AttributeError("ConfigModule.patch no longer sets values through __setattr__")
    for name in REPLAY_MODULES:
        module = importlib.import_module(name)
        values = module._get_dict(ignored_keys=list(module._compile_ignored_keys), skip_default=True)
        if not isinstance(values, dict):
            raise TypeError(f"{name}._get_dict returned {type(values).__name__}")
        key = next(iter(module._config))
        _ = module._config[key].default
        if not hasattr(module._config[key], "env_value_force"):
            raise AttributeError(f"{name}'s config entries have no env_value_force (a value no write overrides)")
        for env_key in [*ENVIRONMENT_DEFAULTS.get(name, ()), *CUSTOM_OP_KEYS.get(name, ())]:
            if env_key not in module._config or env_key in module._compile_ignored_keys:
                raise AttributeError(f"{name}.{env_key} is no longer a compile-relevant config key")
    repro_settings()
    if env_keys("torch._inductor.config").get("freezing") != ("TORCHINDUCTOR_FREEZING",):
        raise AttributeError("torch._inductor.config.freezing is no longer read from TORCHINDUCTOR_FREEZING in its source")
    if not writes_stay_in_their_context():  # (torch 2.11: run_isolated puts the values back itself)
        for name in REPLAY_MODULES:
            for method in ("get_config_copy", "load_config"):
                if not callable(getattr(importlib.import_module(name), method, None)):
                    raise AttributeError(f"config writes leak out of a copied context, and {name}.{method} is gone")


def held_at_default(name: str, key: str) -> tuple[str, Any] | None:
    """Code that holds ``key`` of config module ``name`` at torch's default whatever the program sets later
    (``config.patch`` too, as ``torch.compile(mode=...)`` does), and that default; None where it is no literal.

    A read of a config key returns its ``env_value_force`` before any value written: what
    ``TORCHINDUCTOR_..._FORCE``-style variables set, and what a workaround verified on the
    unchanged program must set, since the program sets the key itself after it.
    """
    entry = importlib.import_module(name)._config.get(key)
    default = getattr(entry, "default", None)
    if entry is None or not isinstance(default, (bool, int, float, str, type(None))):
        return None
    return f"import {name}\n{name}._config[{key!r}].env_value_force = {default!r}\n", default


def run_isolated(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with its config writes kept to itself (a repro's carried definitions, an in-process query).

    In a copy of this context: torch keeps each value a program sets in a ``ContextVar``. A
    torch that does not (2.11) gets every config module's values put back afterwards.
    """
    import contextvars

    if writes_stay_in_their_context():
        return contextvars.copy_context().run(fn, *args)
    saved = {name: module(name).get_config_copy() for name in REPLAY_MODULES}
    try:
        return contextvars.copy_context().run(fn, *args)
    finally:
        for name, values in saved.items():
            module(name).load_config(values)


@functools.cache
def writes_stay_in_their_context() -> bool:
    """Does a config value set inside ``contextvars.copy_context().run(...)`` stay there?

    torch keeps each value a program sets in a ``ContextVar``. pt2kit relies on it to run a repro's carried
    definitions (repro/files.py) and an in-process query (isolation/inprocess.py) without their config writes
    reaching the process that runs them. Checked under ``patch``, which puts the value back either way.
    """
    import contextvars

    dynamo_config = module("torch._dynamo.config")
    before = dynamo_config.assume_static_by_default
    with dynamo_config.patch(assume_static_by_default=before):
        contextvars.copy_context().run(setattr, dynamo_config, "assume_static_by_default", not before)
        return dynamo_config.assume_static_by_default == before


def module(name: str) -> Any:
    return importlib.import_module(name)


def changed_values(name: str) -> dict[str, Any]:
    """Keys of config module ``name`` whose value differs from torch's default (compile-relevant ones only).

    The :data:`ENVIRONMENT_DEFAULTS` keys are always in it, whatever their value.
    """
    config = importlib.import_module(name)
    values = config._get_dict(ignored_keys=list(config._compile_ignored_keys), skip_default=True)
    # torch's config.patch() leaves a key "overridden" with its old value when it
    # exits; a value equal to the default is no change.
    changed = {k: v for k, v in values.items() if v != config._config[k].default}
    # a value torch read from the environment at import (TORCHINDUCTOR_FREEZING=1) is its
    # "default", which torch's own repros drop: the engineer runs the repro without that variable
    for key in from_environment(name):
        changed.setdefault(key, getattr(config, key))
    for key in ENVIRONMENT_DEFAULTS.get(name, ()):
        if key in config._config:
            changed[key] = getattr(config, key)
    return changed


#: What an environment variable torch's config reads is called.
_ENV_NAME = re.compile(r"(PYTORCH|TORCH)[A-Z0-9_]*_[A-Z0-9_]+")


@functools.cache
def env_keys(name: str) -> dict[str, tuple[str, ...]]:
    """Keys of config module ``name`` whose value torch computes from environment variables, with those variables.

    Read off the module's source: most keys are plain assignments such as
    ``freezing: bool = os.environ.get("TORCHINDUCTOR_FREEZING", "0") == "1"``, whose
    result torch then calls the key's default (``_config[key].default``), and a few
    name theirs to ``Config(env_name_default=...)``. Keys in a class body
    (``class cpp:``) are dotted, as torch names them (``cpp.threads``).
    """
    import ast
    import inspect

    found: dict[str, tuple[str, ...]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                variables = tuple(
                    c.value
                    for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and _ENV_NAME.fullmatch(c.value)
                )
                for target in targets:
                    if variables and isinstance(target, ast.Name):
                        found[prefix + target.id] = variables

    visit(ast.parse(inspect.getsource(importlib.import_module(name))).body, "")
    return found


def from_environment(name: str) -> set[str]:
    """Compile-relevant keys of config module ``name`` read from an environment variable set now (:func:`env_keys`)."""
    config = module(name)
    ignored = set(config._compile_ignored_keys)
    return {
        key
        for key, variables in env_keys(name).items()
        if key in config._config and key not in ignored and any(v in os.environ for v in variables)
    }


def environment_variables() -> set[str]:
    """The environment variables compile-relevant keys of :data:`MODULES` are read from (a repro carries those keys instead)."""
    found = set()
    for name in MODULES:
        ignored = set(module(name)._compile_ignored_keys)
        found |= {v for key, variables in env_keys(name).items() if key not in ignored for v in variables}
    return found


def when_set(module_name: str, key: str, callback: Any) -> None:
    """Call ``callback()`` whenever ``key`` of config module ``module_name`` is set to a true value.

    One Python call more per config write; reading config is untouched.
    """
    config = importlib.import_module(module_name)
    cls = type(config)
    original = cls.__setattr__

    def __setattr__(self: Any, name: str, value: object) -> None:
        original(self, name, value)
        if name == key and value:
            callback()

    setattr(cls, "__setattr__", __setattr__)


def repro_settings() -> dict[str, Any]:
    """torch's own minifier settings as the program left them: ``repro_after``, ``repro_level``, ``debug_dir_root``."""
    import torch._dynamo.config as dynamo_config

    return {key: getattr(dynamo_config, key) for key in ("repro_after", "repro_level", "debug_dir_root")}
