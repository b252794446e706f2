"""``poptorch.optim``: SGD, Adam, AdamW, RMSprop and LAMB with PopTorch's signatures. Each is torch's optimizer
(LAMB written out) that also takes PopTorch's extra arguments (``loss_scaling``, ``accum_type``,
``first_order_momentum_accum_type``, ``velocity_scaling``, ``max_grad_norm``, ...), kept in ``poptorch_args``:
``loss_scaling`` scales the loss of each backward pass and divides the gradients again, ``max_grad_norm`` clips the
gradients' global norm before the update."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from ipuexp.training.optim import lamb_class

_EXTRAS = ("loss_scaling", "velocity_scaling", "use_combined_accum", "accum_type", "velocity_accum_type",
           "first_order_momentum_accum_type", "second_order_momentum_accum_type", "max_grad_norm",
           "use_tf_variant", "bias_correction", "max_weight_norm")


def _split(kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(torch's arguments, PopTorch's extras) with the None values left out, so torch's defaults apply."""
    torch_args = {k: v for k, v in kwargs.items() if k not in _EXTRAS and v is not None}
    extras = {k: v for k, v in kwargs.items() if k in _EXTRAS and v is not None}
    return torch_args, extras


class VariableAttributes:
    """Which hyper-parameters may change after compile (PopTorch's ``optimizer.variable_attrs``): those given
    explicitly, or marked variable. PopART compiles constants in; SGD with a constant zero momentum and no gradient
    accumulation is its momentum-less variant."""

    def __init__(self, variable: List[str], allowed: List[str]) -> None:
        self._variable_attributes = list(variable)
        self._allowed_attributes = list(allowed)

    def isConstant(self, attr: str) -> bool:
        return attr not in self._variable_attributes

    def _check(self, attr: str) -> None:
        if attr not in self._allowed_attributes:
            raise ValueError(f"Unknown attribute {attr}, allowed values: {self._allowed_attributes}")

    def markAsConstant(self, attr: str) -> None:
        self._check(attr)
        self._variable_attributes = [a for a in self._variable_attributes if a != attr]

    def markAsVariable(self, attr: str) -> None:
        self._check(attr)
        if attr not in self._variable_attributes:
            self._variable_attributes.append(attr)


class Optimizer:
    """What the PopTorch optimizers share: their extra arguments, the gradient clipping they ask for, the
    variable attributes, and the device state (``ipu_state``/``ipu_param``) in ``state_dict``."""

    poptorch_args: Dict[str, Any]
    variable_attrs: VariableAttributes

    def _track(self, given: Dict[str, Any]) -> None:
        allowed = sorted(k for k in self.defaults if k not in ("foreach", "maximize", "capturable",
                                                              "differentiable", "fused"))
        sgd = isinstance(self, torch.optim.SGD)
        allowed += [k for k in ("loss_scaling", "velocity_scaling", "max_weight_norm")
                    if k == "loss_scaling" or k in given or (k == "velocity_scaling" and sgd)]
        self.variable_attrs = VariableAttributes([k for k, v in given.items() if v is not None and k in allowed],
                                                 allowed)

    def state_dict(self) -> Dict[str, Any]:
        """torch's state dict with ``ipu_state`` and ``ipu_param``: the device's state once a model compiled
        for a device uses this optimizer, what was loaded before that, ``None`` before either."""
        out = super().state_dict()  # type: ignore[misc]
        device = self.__dict__.get("_ipu_device")
        shown = self.__dict__.get("_ipu_shown") or self.__dict__.get("_ipu_pending")
        if shown is not None:  # what was loaded, until a model uses it
            out["ipu_state"], out["ipu_param"] = ({k: v.clone() for k, v in d.items()} for d in shown)
        elif device is not None:
            out["ipu_state"], out["ipu_param"] = device.read(self)
        else:
            out["ipu_state"], out["ipu_param"] = None, None
        return out

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """torch's state and parameter groups, then the device state (PopTorch loads only IPU optimizer states)."""
        if not state:
            raise RuntimeError("Cannot load optimizer state dictionary because it is empty.")
        if "ipu_state" not in state or "ipu_param" not in state:
            raise RuntimeError("Only IPU optimizer states can be loaded onto the IPU.")
        super().load_state_dict({k: v for k, v in state.items()  # type: ignore[misc]
                                 if k not in ("ipu_state", "ipu_param")})
        if state["ipu_state"] is None or state["ipu_param"] is None:
            return
        loaded = (dict(state["ipu_state"]), dict(state["ipu_param"]))
        device = self.__dict__.get("_ipu_device")
        if device is not None:
            device.write(self, *loaded)
            self._ipu_shown = loaded
        else:
            self._ipu_pending = loaded

    @property
    def loss_scaling(self) -> float:
        return float(self.poptorch_args.get("loss_scaling", 1.0))

    @loss_scaling.setter
    def loss_scaling(self, value: float) -> None:
        """A new loss scale (PopTorch: set on the optimizer, then ``setOptimizer``)."""
        self.poptorch_args["loss_scaling"] = float(value)

    def __getattr__(self, name: str) -> Any:
        """PopTorch's extra arguments read as attributes (``optimizer.accum_type``); None where not given."""
        if name in _EXTRAS and "poptorch_args" in self.__dict__:
            return self.__dict__["poptorch_args"].get(name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        """... and set as attributes, as PopTorch's optimizers take them."""
        if name in _EXTRAS and name != "loss_scaling" and "poptorch_args" in self.__dict__:
            self.__dict__["poptorch_args"][name] = value
        else:
            super().__setattr__(name, value)

    def __getstate__(self) -> Dict[str, Any]:
        """torch's state (defaults, state, param groups) and the extra arguments, which torch's alone would drop."""
        return {**super().__getstate__(), "poptorch_args": self.poptorch_args}  # type: ignore[misc]

    def _stepped(self, base_step: Any, closure: Any) -> Any:
        """One step of ``base_step`` (torch's), with the per-weight hyper-parameters a loaded ``ipu_param`` set."""
        from ipuexp.poptorch.optim_state import effective_groups

        self._clip()
        self.__dict__.pop("_ipu_shown", None)
        groups = effective_groups(self)
        if groups is None:
            return base_step(self, closure)
        saved, self.param_groups = self.param_groups, groups
        try:
            return base_step(self, closure)
        finally:
            self.param_groups = saved

    def _clip(self) -> None:
        norm = self.poptorch_args.get("max_grad_norm")
        if norm is not None and norm != float("inf"):
            params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(params, float(norm))


def _make(base: Any, name: str, doc: str) -> Any:
    def __init__(self: Any, params: Any, lr: Optional[float] = None, **kwargs: Any) -> None:
        torch_args, self.poptorch_args = _split(dict(kwargs, lr=lr))
        if name == "AdamW" and "weight_decay" not in torch_args:
            torch_args["weight_decay"] = 0.01  # PopTorch's (and torch's) AdamW default
        base.__init__(self, params, **torch_args)
        self._track(dict(kwargs, lr=lr))

    def step(self: Any, closure: Any = None) -> Any:
        if name == "RMSprop" and self.poptorch_args.get("use_tf_variant"):
            from ipuexp.poptorch import tf_rmsprop

            return self._stepped(tf_rmsprop.step, closure)
        return self._stepped(base.step, closure)

    return type(name, (Optimizer, base), {"__init__": __init__, "step": step, "__doc__": doc,
                                          "__module__": __name__})


SGD = _make(torch.optim.SGD, "SGD", "torch.optim.SGD with PopTorch's extra arguments.")
Adam = _make(torch.optim.Adam, "Adam", "torch.optim.Adam with PopTorch's extra arguments.")
AdamW = _make(torch.optim.AdamW, "AdamW", "torch.optim.AdamW with PopTorch's extra arguments (weight decay 0.01).")
RMSprop = _make(torch.optim.RMSprop, "RMSprop", "torch.optim.RMSprop with PopTorch's extra arguments.")


_Lamb = lamb_class()


def _native() -> Tuple[type, ...]:
    return (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop, SGD, Adam, AdamW, RMSprop,
            LAMB)


def device_step(optimizer: Any) -> None:
    """The update the device runs: the step of the PopTorch (or torch) optimizer class ``optimizer`` is or
    derives from, never a subclass's or an instance's own ``step`` (PopTorch runs PopART's optimizer)."""
    for cls in type(optimizer).__mro__:
        if cls in _native():
            cls.step(optimizer)
            return
    optimizer.step()


def warn_if_subclassed(optimizer: Any) -> Any:
    """PopTorch's warning for an optimizer class derived from one of its own or torch's: the device runs
    PopART's optimizer, never the subclass's Python."""
    native = _native()
    if isinstance(optimizer, native) and type(optimizer) not in native:
        from ipuexp.poptorch.logs import log

        log.warning(
            "Optimizer `%s` subclassed from classes in poptorch.optim or torch.optim are unlikely to behave as "
            "intended. Poptorch does not run Python optimizer code directly; but instead uses IPU native "
            "optimisers implemented in PopART.", type(optimizer).__name__)
    return optimizer


class LAMB(Optimizer, _Lamb):
    """LAMB (You et al. 2020, algorithm 2) with PopTorch's arguments: the functional engine's LAMB
    (``ipuexp.training.optim``), bias-corrected unless ``bias_correction=False``, ||w|| clipped to
    ``max_weight_norm`` when given."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, bias_correction: bool = True, **kwargs: Any) -> None:
        _, self.poptorch_args = _split(kwargs)
        _Lamb.__init__(self, params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                       bias_correction=bias_correction, max_weight_norm=self.poptorch_args.get("max_weight_norm"))
        self._track(dict(kwargs, lr=lr))

    def step(self, closure: Any = None) -> Any:
        return self._stepped(_Lamb.step, closure)
