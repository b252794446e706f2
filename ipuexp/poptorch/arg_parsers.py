"""PopTorch's custom argument parsers: a model input of a type of the script's own is flattened into its tensors by
the ``ICustomArgParser`` registered for that type and rebuilt from them, which ipuexp does by registering the type
with torch's pytree (how the executor splits a call into micro-batches and the capture finds the inputs)."""
from __future__ import annotations

import abc
from typing import Any, Dict, Iterator, List, Optional, Tuple

from torch.utils import _pytree as pytree

from ipuexp.poptorch.errors import Error

_parsers: Dict[type, "ICustomArgParser"] = {}


class ICustomArgParser(abc.ABC):
    """Interface of a parser that extracts the tensors of a custom input type and rebuilds the type from them."""

    @abc.abstractmethod
    def yieldTensors(self, struct: Any) -> Iterator[Any]:
        """Yield every torch.Tensor of ``struct`` in a deterministic order."""

    @abc.abstractmethod
    def reconstruct(self, original_structure: Any, tensor_iterator: Iterator[Any]) -> Any:
        """A structure like ``original_structure`` with the tensors taken in order from ``tensor_iterator``."""


def registerCustomArgParser(arg_data_type: type, arg_parser: Optional[ICustomArgParser]) -> None:
    """Use ``arg_parser`` for inputs of ``arg_data_type`` (None: stop using the one registered)."""
    if arg_parser is None:
        if _parsers.pop(arg_data_type, None) is not None:
            pytree._deregister_pytree_node(arg_data_type)
        return
    if not isinstance(arg_parser, ICustomArgParser):
        raise Error("arg_parser must inherit from ICustomArgParser")
    if arg_data_type in _parsers:
        pytree._deregister_pytree_node(arg_data_type)
    _parsers[arg_data_type] = arg_parser

    def flatten(value: Any) -> Tuple[List[Any], Any]:
        return list(_parsers[arg_data_type].yieldTensors(value)), value

    def unflatten(values: Any, original: Any) -> Any:
        return _parsers[arg_data_type].reconstruct(original, iter(list(values)))

    def flatten_with_keys(value: Any) -> Tuple[List[Tuple[Any, Any]], Any]:
        values, context = flatten(value)
        return [(pytree.SequenceKey(i), v) for i, v in enumerate(values)], context

    pytree.register_pytree_node(arg_data_type, flatten, unflatten, flatten_with_keys_fn=flatten_with_keys)
