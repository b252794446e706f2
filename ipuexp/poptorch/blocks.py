"""Block annotations: ``Block`` (a context manager), ``BeginBlock`` (a module's forward pre-hook), ``BlockFunction``
(a decorator). Outside a capture they do nothing, as in PopTorch on the CPU; while ipuexp captures a model, each
tells the capture which block the ops that follow belong to (``listening``)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Optional, Protocol

import torch


class BlockListener(Protocol):
    """What a capture implements to hear the annotations."""

    def begin(self, user_id: Optional[str], ipu_id: Optional[int], scoped: bool = False) -> None: ...

    def end(self) -> None: ...

    def reset_auto_id(self) -> None: ...


_listeners: List[BlockListener] = []


@contextlib.contextmanager
def listening(listener: BlockListener) -> Iterator[None]:
    """Send the annotations met in the ``with`` block to ``listener``."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _begin(user_id: Optional[str], ipu_id: Optional[int], scoped: bool = False) -> None:
    if _listeners:
        _listeners[-1].begin(user_id, ipu_id, scoped)


class Block(torch.nn.Module):
    """``with poptorch.Block("B1", ipu_id=0):`` puts the ops of the ``with`` block into block B1 (on IPU 0).

    Blocks with the same ID are one block."""

    @staticmethod
    def useAutoId() -> None:
        """Blocks without a ``user_id`` are numbered "0", "1", ... from here."""
        if _listeners:
            _listeners[-1].reset_auto_id()

    @staticmethod
    def start(user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        _begin(user_id, ipu_id)

    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        super().__init__()
        self._user_id = user_id
        self._ipu_id = ipu_id

    def __enter__(self) -> None:
        _begin(self._user_id, self._ipu_id, scoped=True)

    def __exit__(self, *exc: Any) -> None:
        if _listeners:
            _listeners[-1].end()


class _BlockHook:
    """The forward pre-hook ``BeginBlock`` registers."""

    def __init__(self, user_id: Optional[str], ipu_id: Optional[int]) -> None:
        self._user_id = user_id
        self._ipu_id = ipu_id

    def __call__(self, module: Any, inputs: Any) -> None:
        _begin(self._user_id, self._ipu_id)

    def __repr__(self) -> str:
        return f"BeginBlock(user_id={self._user_id}, ipu_id={self._ipu_id})"


class _LegacyBeginBlockFn(torch.nn.Module):
    """``BeginBlock`` of a plain function."""

    def __init__(self, layer_to_call: Callable[..., Any], user_id: Optional[str], ipu_id: Optional[int]) -> None:
        super().__init__()
        self._layer_to_call = layer_to_call
        self._hook = _BlockHook(user_id, ipu_id)

    @property
    def _user_id(self) -> Optional[str]:
        return self._hook._user_id

    @property
    def _ipu_id(self) -> Optional[int]:
        return self._hook._ipu_id

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._hook(self, args)
        return self._layer_to_call(*args, **kwargs)


def BeginBlock(layer_to_call: Any, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> Any:
    """Start block ``user_id`` (on IPU ``ipu_id``) where ``layer_to_call`` runs; returns the module."""
    if not isinstance(layer_to_call, torch.nn.Module):
        if callable(layer_to_call):
            return _LegacyBeginBlockFn(layer_to_call, user_id, ipu_id)
        raise TypeError("module is not an instance of torch.nn.Module or function.")
    if any(isinstance(h, _BlockHook) for h in layer_to_call._forward_pre_hooks.values()):
        raise ValueError("module has already been assigned to a block.")
    layer_to_call.register_forward_pre_hook(_BlockHook(user_id, ipu_id))
    return layer_to_call


def BlockFunction(user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> Callable[[Any], Any]:
    """A decorator: the function's ops form block ``user_id`` (on IPU ``ipu_id``)."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with Block(user_id, ipu_id):
                return func(*args, **kwargs)

        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__doc__ = func.__doc__
        return wrapper

    return decorator


def removeBlocks(module: torch.nn.Module) -> None:
    """Remove the ``BeginBlock`` annotations of ``module`` and its sub-modules."""
    for m in module.modules():
        for key in [k for k, h in m._forward_pre_hooks.items() if isinstance(h, _BlockHook)]:
            del m._forward_pre_hooks[key]


def module_repr(module: torch.nn.Module) -> str:
    """``repr(module)`` with each module's ``BeginBlock`` shown before its name (``BeginBlock(user_id=1, ipu_id=2)
    Conv2d(...)``), which torch's repr leaves out."""
    hooks = "".join(f"{h!r} " for h in module._forward_pre_hooks.values() if isinstance(h, _BlockHook))
    extra = module.extra_repr().split("\n") if module.extra_repr() else []
    children = ["(" + name + "): " + module_repr(child).replace("\n", "\n  ")
                for name, child in module._modules.items() if child is not None]
    if len(extra) == 1 and not children:
        return f"{hooks}{module._get_name()}({extra[0]})"
    inner = "".join(f"\n  {line}" for line in extra + children)
    return f"{hooks}{module._get_name()}({inner + chr(10) if inner else ''})"
