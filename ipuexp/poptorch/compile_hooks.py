"""``registerPreCompileHook`` and ``registerPostCompileHook``: callables run before and after each model's compile
(its capture and prediction, or its compile alone once a model of the job was predicted)."""
from __future__ import annotations

from typing import Any, Callable, Dict

import torch.utils.hooks



class _Hooks(Dict[int, Callable[[], Any]]):
    """A dict that a RemovableHandle can hold a weak reference to."""


pre_compile = _Hooks()
post_compile = _Hooks()


def _register(hooks: Dict[int, Callable[[], Any]], hook: Callable[[], Any]) -> torch.utils.hooks.RemovableHandle:
    handle = torch.utils.hooks.RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def registerPreCompileHook(hook: Callable[[], Any]) -> torch.utils.hooks.RemovableHandle:
    """Run ``hook`` before each compile; the handle's ``remove()`` unregisters it."""
    if not callable(hook):
        raise RuntimeError("Pre-compile hook must be callable")
    return _register(pre_compile, hook)


def registerPostCompileHook(hook: Callable[[], Any]) -> torch.utils.hooks.RemovableHandle:
    """Run ``hook`` after each compile; the handle's ``remove()`` unregisters it."""
    if not callable(hook):
        raise RuntimeError("Post-compile hook must be callable")
    return _register(post_compile, hook)


def run(hooks: Dict[int, Callable[[], Any]]) -> None:
    for hook in list(hooks.values()):
        hook()
