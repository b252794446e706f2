"""The optimizer state PopTorch's ``state_dict()`` carries to checkpoint and resume training on the IPU:
``ipu_state`` (the optimizer's state tensors) and ``ipu_param`` (its hyper-parameters as the device holds them),
named as PopART names them (``willow/include/popart/tensornames.hpp``: ``Accl1___`` + the weight's name, the
compound scalars ``scaledLearningRate0___specific___`` + name, ``lossScaling_FLOAT``, ...) and valued by PopART's
compound-scalar formulas (``compoundscalarhelper.hpp``) with the accumulation and replication factors at 1: ipuexp
divides the summed gradients by them itself. Both are ``None`` until a model compiled for a device (not an
offline target) uses the optimizer. The tensors are views of torch's optimizer state, which the host steps;
``load_state_dict`` writes them back into it and into the parameter groups."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

_SPEC = "___specific___"

# torch state key for each PopART state prefix, by optimizer kind.
_STATE = {"sgd0": (), "sgd1": (("Accl___", "momentum_buffer"),), "sgd2": (("Accl1___", "momentum_buffer"),),
          "adam": (("Accl1___", "exp_avg"), ("Accl2___", "exp_avg_sq"), ("Step___", "step")),
          "rmsprop": (("Accl1___", "square_avg"), ("Accl2___", "grad_avg"), ("Accl3___", "momentum_buffer"))}


# torch state a step needs besides the tensors PopART names (torch creates it with them).
_TORCH_ONLY = {"rmsprop": ("step",), "adam": ()}


def kind(optimizer: Any, accumulation: int = 1) -> str:
    """PopART's optimizer for ``optimizer``: SGD without momentum (a constant 0) and without gradient
    accumulation is PopART's SGD0; otherwise SGD1 (combined tensor) or SGD2 (separate, PopTorch's default)."""
    if isinstance(optimizer, torch.optim.SGD):
        momentum = optimizer.param_groups[0].get("momentum", 0.0)
        attrs = getattr(optimizer, "variable_attrs", None)
        constant = attrs is None or attrs.isConstant("momentum")
        if momentum == 0.0 and constant and accumulation == 1:
            return "sgd0"
        return "sgd1" if getattr(optimizer, "poptorch_args", {}).get("use_combined_accum") else "sgd2"
    if isinstance(optimizer, torch.optim.RMSprop):
        return "rmsprop"
    return "adam"  # Adam, AdamW, LAMB


def _prefixes(k: str, group: Dict[str, Any]) -> List[Tuple[str, str]]:
    pairs = list(_STATE[k])
    if k == "rmsprop":  # Accl2 only when centered, Accl3 only with momentum
        pairs = [p for p in pairs if p[1] == "square_avg" or (p[1] == "grad_avg" and group.get("centered"))
                 or (p[1] == "momentum_buffer" and group.get("momentum", 0.0))]
    return pairs


def _params(k: str, g: Dict[str, Any], ls: float, vs: float) -> Dict[str, float]:
    """The hyper-parameters of group ``g`` as PopART's scalars."""
    lr, wd = float(g["lr"]), float(g.get("weight_decay", 0.0))
    if k == "sgd0":
        dp = float(g.get("dampening", 0.0))
        return {"scaledLearningRate0": lr * (1 - dp) / ls, "weightDecayScaleFactor0": 1 - lr * (1 - dp) * wd}
    if k in ("sgd1", "sgd2"):
        n, dm, mm = k[-1], float(g.get("dampening", 0.0)), float(g.get("momentum", 0.0))
        out = {f"scaledLearningRate{n}": lr / vs, f"dampeningScaleFactor{n}": (1 - dm) * vs / ls,
               f"scaledMomentum{n}": mm}
        out.update({"scaledWeightDecay1": (1 - dm) * wd * vs} if n == "1" else {"sgdWeightDecay": wd})
        return out
    if k == "rmsprop":
        return {"learningRate": lr, "weightDecay": wd, "adaptiveAlpha": float(g["alpha"]),
                "adaptiveEps": float(g["eps"]), "adaptiveMomentum": float(g.get("momentum", 0.0))}
    b1, b2 = g["betas"]
    out = {"learningRate": lr, "weightDecay": wd, "adamBeta1": float(b1), "adamBeta2": float(b2),
           "adamEps": float(g["eps"])}
    if g.get("max_weight_norm") is not None:
        out["maxWeightNorm"] = float(g["max_weight_norm"])
    return out


def _set_params(k: str, g: Dict[str, Any], values: Dict[str, float], ls: float, vs: float) -> None:
    """The inverse of ``_params``: the scalars given back into group ``g``'s hyper-parameters."""
    if k == "sgd0":
        dp = float(g.get("dampening", 0.0))
        if "scaledLearningRate0" in values:
            g["lr"] = values["scaledLearningRate0"] * ls / (1 - dp)
        if "weightDecayScaleFactor0" in values and g["lr"] * (1 - dp) != 0:
            g["weight_decay"] = (1 - values["weightDecayScaleFactor0"]) / (g["lr"] * (1 - dp))
        return
    if k in ("sgd1", "sgd2"):
        n = k[-1]
        if f"scaledLearningRate{n}" in values:
            g["lr"] = values[f"scaledLearningRate{n}"] * vs
        if f"scaledMomentum{n}" in values:
            g["momentum"] = values[f"scaledMomentum{n}"]
        if f"dampeningScaleFactor{n}" in values:
            g["dampening"] = 1 - values[f"dampeningScaleFactor{n}"] * ls / vs
        dm = float(g.get("dampening", 0.0))
        if "scaledWeightDecay1" in values and dm != 1:
            g["weight_decay"] = values["scaledWeightDecay1"] / ((1 - dm) * vs)
        if "sgdWeightDecay" in values:
            g["weight_decay"] = values["sgdWeightDecay"]
        return
    simple = {"learningRate": "lr", "weightDecay": "weight_decay", "adaptiveAlpha": "alpha", "adaptiveEps": "eps",
              "adaptiveMomentum": "momentum", "adamEps": "eps", "maxWeightNorm": "max_weight_norm"}
    for name, key in simple.items():
        if name in values:
            g[key] = values[name]
    if "adamBeta1" in values or "adamBeta2" in values:
        b1, b2 = g["betas"]
        g["betas"] = (values.get("adamBeta1", b1), values.get("adamBeta2", b2))


def _hyper(optimizer: Any) -> Any:
    """What the loaded ``ipu_param`` values stand for: they hold until a hyper-parameter changes."""
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    return repr((groups, sorted(getattr(optimizer, "poptorch_args", {}).items(), key=str)))


class DeviceState:
    """An optimizer's link to the model that uses it: the weights' names and PopART's optimizer kind."""

    def __init__(self, optimizer: Any, model: torch.nn.Module, accumulation: int) -> None:
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.kind = kind(optimizer, accumulation)

    def _scales(self, optimizer: Any) -> Tuple[float, float]:
        args = getattr(optimizer, "poptorch_args", {})
        return float(args.get("loss_scaling", 1.0)), float(args.get("velocity_scaling", 1.0))

    def _each(self, optimizer: Any) -> Any:
        for g in optimizer.param_groups:
            for p in g["params"]:
                if id(p) in self.names:
                    yield g, p, self.names[id(p)]

    def read(self, optimizer: Any) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
        """(ipu_state, ipu_param); state not yet created by a step reads as PopART initialises it: zeros."""
        ls, vs = self._scales(optimizer)
        state: Dict[str, torch.Tensor] = {}
        param: Dict[str, torch.Tensor] = {}
        overrides = _overrides(optimizer)
        for g, p, name in self._each(optimizer):
            g = overrides.get(id(p), g)
            held = optimizer.state.get(p, {})
            for prefix, key in _prefixes(self.kind, g):
                value = held.get(key)
                if value is None:
                    value = torch.tensor(0.0) if key == "step" else torch.zeros_like(p, dtype=torch.float32)
                state[prefix + name] = torch.as_tensor(value, dtype=torch.float32).detach().clone()
            for scalar, value in _params(self.kind, g, ls, vs).items():
                param[scalar + _SPEC + name] = torch.tensor(value, dtype=torch.float32)
        param["lossScaling_FLOAT"] = torch.tensor(ls, dtype=torch.float32)
        loaded = _loaded(optimizer)
        if loaded is not None:
            param.update({k: v.clone() for k, v in loaded[1].items() if k in param})
        return state, param

    def write(self, optimizer: Any, ipu_state: Dict[str, torch.Tensor], ipu_param: Dict[str, torch.Tensor]) -> None:
        """Load ``ipu_state`` into torch's optimizer state and ``ipu_param`` into each weight's hyper-parameters,
        which hold, per weight as on the device, until the parameter groups' own change."""
        ls, vs = self._scales(optimizer)
        if "lossScaling_FLOAT" in ipu_param and hasattr(optimizer, "poptorch_args"):
            optimizer.poptorch_args["loss_scaling"] = ls = float(ipu_param["lossScaling_FLOAT"])
        per_weight: Dict[int, Dict[str, Any]] = {}
        for g, p, name in self._each(optimizer):
            scalars = {k[:-len(_SPEC + name)]: float(v) for k, v in ipu_param.items() if k.endswith(_SPEC + name)}
            if scalars:
                mine = per_weight[id(p)] = {k: v for k, v in g.items() if k != "params"}
                _set_params(self.kind, mine, scalars, ls, vs)
            g = per_weight.get(id(p), g)
            given = {key: ipu_state[prefix + name] for prefix, key in _prefixes(self.kind, g)
                     if prefix + name in ipu_state}
            held = optimizer.state[p]
            if not given and not held:
                continue
            needed = [key for _, key in _prefixes(self.kind, g)] + list(_TORCH_ONLY.get(self.kind, ()))
            if g.get("amsgrad"):
                needed.append("max_exp_avg_sq")
            for key in needed:  # a step needs every tensor: the missing ones as read
                if key not in held:
                    held[key] = torch.tensor(0.0) if key == "step" else torch.zeros_like(p)
            for key, value in given.items():
                value = torch.as_tensor(value).detach().clone()
                # A step count is a whole number of steps taken, not below 0: torch's bias corrections raise the
                # betas to it, where a fraction or a negative count gives a complex number.
                held[key] = value.to(torch.float32).round().clamp(min=0) if key == "step" \
                    else value.to(p.dtype).reshape(p.shape)
        optimizer._ipu_loaded = (_hyper(optimizer), {k: torch.as_tensor(v).clone() for k, v in ipu_param.items()},
                                 per_weight)


def _loaded(optimizer: Any) -> Optional[Tuple[Any, Dict[str, torch.Tensor], Dict[int, Dict[str, Any]]]]:
    """The loaded ``ipu_param`` while the parameter groups still hold what they held when it was loaded."""
    loaded = optimizer.__dict__.get("_ipu_loaded")
    if loaded is not None and loaded[0] != _hyper(optimizer):
        loaded = optimizer._ipu_loaded = None
    return loaded


def _overrides(optimizer: Any) -> Dict[int, Dict[str, Any]]:
    loaded = _loaded(optimizer)
    return loaded[2] if loaded is not None else {}


def effective_groups(optimizer: Any) -> Optional[List[Dict[str, Any]]]:
    """The parameter groups a step uses when loaded per-weight hyper-parameters hold (None: the optimizer's own):
    each group split by its weights' values."""
    overrides = _overrides(optimizer)
    if not overrides:
        return None
    groups: List[Dict[str, Any]] = []
    for g in optimizer.param_groups:
        parts: Dict[str, Dict[str, Any]] = {}
        for p in g["params"]:
            hyper = overrides.get(id(p), {k: v for k, v in g.items() if k != "params"})
            parts.setdefault(repr(sorted(hyper.items(), key=str)), {**hyper, "params": []})["params"].append(p)
        groups.extend(parts.values())
    return groups


def bind(optimizer: Any, model: torch.nn.Module, accumulation: int) -> None:
    """Link ``optimizer`` to ``model`` on its device, writing any ``ipu_state``/``ipu_param`` loaded meanwhile."""
    if not hasattr(optimizer, "variable_attrs"):  # torch's own optimizers carry no IPU state
        return
    device = optimizer._ipu_device = DeviceState(optimizer, model, accumulation)
    pending: Optional[Tuple[Any, Any]] = optimizer.__dict__.pop("_ipu_pending", None)
    if pending is not None:
        device.write(optimizer, *pending)


def adopt(current: Any, new: Any) -> Any:
    """``setOptimizer``: ``new``'s hyper-parameters go into ``current`` too (a script may keep either) and ``new``
    takes over ``current``'s state, which stays on the device, unless ``new`` brings a loaded device state."""
    for mine, theirs in zip(current.param_groups, new.param_groups):
        mine.update({k: v for k, v in theirs.items() if k != "params"})
    if hasattr(new, "poptorch_args"):
        current.poptorch_args = dict(new.poptorch_args)
    new.state = current.state
    return new


def follow(executor: Any, compiling: bool = False) -> None:
    """A training model takes its optimizer (compile, ``setOptimizer``): PopTorch's checks of the optimizer
    (``optim_attrs``), and the optimizer's device state follows the model once it is compiled for a device."""
    if not executor.training or not executor._compiled:
        return
    from ipuexp.poptorch.optim_attrs import AttributeTracker, reduction_for

    options = executor.options
    tracker = executor.__dict__.get("_attributes")
    if tracker is None:
        tracker = executor._attributes = AttributeTracker(bool(options.calls.get("relaxOptimizerAttributesChecks")))
    tracker.check(executor.optimizer)
    reduction_for(executor.optimizer, options, compiling)
    if not options.calls.get("useOfflineIpuTarget"):
        bind(executor.optimizer, executor.model, options.Training.gradient_accumulation)
