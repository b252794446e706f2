"""What every importer shares: the draft of a recipe, the refusal, and the choice of zoo model and system.

An importer reads one configuration of a published file and fills a :class:`Draft`: ipuexp keys (dotted) with the
value and a note saying where it came from. Every key of the file is one of three things: mapped (a value in the
draft), not modelled (it changes nothing the emulator predicts: logging, data paths, learning-rate schedules,
dropout; listed in one warning line), or refused (a :class:`ConfigError` naming the key, its value and what ipuexp
can take).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ipuexp.config.file_values import (as_bool, as_float, as_int, as_int_list, as_proportion, choose,  # noqa: F401
                                       one_line, refuse)

# IPU-POD systems by size (conf/system): an imported run gets the smallest one that holds its IPUs.
SYSTEMS = ((4, "pod4"), (16, "pod16"), (64, "pod64"), (128, "pod128"), (256, "pod256"))
SYSTEM_NAMES = tuple(name for _, name in SYSTEMS)
IPUS = ("mk2", "bow", "mk1")


PACKING_FACTOR = {128: 1.17, 384: 1.7, 512: 2.0}
"""Sequences per pack on average of Graphcore's packed Wikipedia at each sequence length (at most 3 per pack):
graphcore/examples@3cc8f81 nlp/bert/pytorch/configs_pretraining.yml ``packing_factor``, by which the packed
configurations divide their gradient accumulation (438 = 512 / 1.17 at 128)."""


@dataclass
class Draft:
    """The recipe an importer builds from one configuration."""

    source: str
    """Public locator of the file and configuration (``repository@commit:path#config``)."""
    title: str
    """The application the file belongs to, in words (the recipe's header)."""
    values: Dict[str, Any] = field(default_factory=dict)
    """ipuexp keys (dotted, e.g. ``options.replication_factor``) and their values."""
    notes: Dict[str, str] = field(default_factory=dict)
    """Where each value came from: the file's key, or the application's code default with its citation."""
    unmodelled: List[str] = field(default_factory=list)
    """Keys of the file that change nothing ipuexp predicts."""
    warnings: List[str] = field(default_factory=list)
    """Other remarks for the user (a repeated key, a value chosen among several)."""
    ipu: str = "mk2"
    """IPU generation (group ``ipu``)."""
    system: Optional[str] = None
    """System (group ``system``); None: the smallest POD that holds replicas x IPUs per replica."""

    def set(self, key: str, value: Any, note: str = "") -> None:
        self.values[key] = value
        if note:
            self.notes[key] = note

    def default(self, key: str, value: Any, note: str) -> None:
        """Set ``key`` unless the file already did (an application default the file leaves alone)."""
        if key not in self.values:
            self.set(key, value, note)

    def skip(self, key: str) -> None:
        if key not in self.unmodelled:
            self.unmodelled.append(key)


def only(allowed: Any, why: str) -> Callable[["Draft", str, Any], None]:
    """The rule of a key that changes nothing ipuexp predicts at ``allowed`` (compared as text, as the file may
    spell it) and is refused otherwise."""
    def rule(draft: Draft, key: str, value: Any) -> None:
        if str(value) != str(allowed):
            raise refuse(key, value, f"allowed: {allowed} ({why})")
        draft.skip(key)
    return rule


def system_for(num_ipus: int, key: str = "replication_factor") -> str:
    """The smallest IPU-POD with at least ``num_ipus`` IPUs."""
    for size, name in SYSTEMS:
        if num_ipus <= size:
            return name
    raise refuse(key, num_ipus, f"allowed: replicas x IPUs per replica <= {SYSTEMS[-1][0]} (the largest system)")


def zoo_size(family: str, key: str, value: Any, wanted: Mapping[str, Any]) -> str:
    """The zoo variant of ``family`` whose hyper-parameters equal ``wanted`` (e.g. hidden and heads).

    ``key``/``value`` name the file's setting reported when none matches.
    """
    from ipuexp.models.variants import VARIANTS

    for size, hp in VARIANTS[family].items():
        if all(hp.get(k) == v for k, v in wanted.items() if v is not None):
            return size
    sizes = ", ".join(f"{' '.join(str(hp.get(k)) for k in wanted)} ({size})" for size, hp in VARIANTS[family].items())
    names = "/".join(wanted)
    raise refuse(key, value, f"no zoo {family} variant has this {names}; allowed: {sizes}")


def zoo_layers(family: str, size: str) -> int:
    from ipuexp.models.variants import VARIANTS

    return int(VARIANTS[family][size]["layers"])


def heads_back_on_first_ipu(layers_per_ipu: Sequence[int]) -> List[int]:
    """Stage i on IPU i, and the heads in a stage of their own on IPU 0 (tied to the embedding there)."""
    return list(range(len(layers_per_ipu))) + [0]


def classify(draft: Draft, config: Mapping[str, Any], rules: Mapping[str, Callable[[Draft, str, Any], None]],
             unmodelled: Iterable[str], prefix: str = "") -> None:
    """Apply ``rules[key]`` to every key of ``config``; list ``unmodelled`` keys; refuse any other key."""
    quiet = set(unmodelled)
    for key, value in config.items():
        if key in rules:
            rules[key](draft, key, value)
        elif key in quiet:
            draft.skip(f"{prefix}{key}")
        else:
            raise refuse(f"{prefix}{key}", value, "no ipuexp setting corresponds to this key")


def to(target: str, convert: Callable[[str, Any], Any] = lambda k, v: v, note: str = "") -> Callable:
    """A rule setting ``target`` to the converted value, noted as ``key: value``."""

    def rule(draft: Draft, key: str, value: Any) -> None:
        draft.set(target, convert(key, value), note or f"{key}: {_show(value)}")

    return rule


def _show(value: Any) -> str:
    import json

    return json.dumps(value) if not isinstance(value, str) else value


def nested(values: Mapping[str, Any]) -> Dict[str, Any]:
    """Dotted keys as nested mappings."""
    out: Dict[str, Any] = {}
    for key, value in values.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def unpack_source(source: str) -> Tuple[str, str]:
    """``LOCATOR#CONFIG`` -> (LOCATOR, CONFIG)."""
    locator, _, config = source.partition("#")
    return locator, config


def bert(draft: Draft, hidden: Tuple[str, Any], heads: Tuple[str, Any], layers: Optional[Tuple[str, Any]],
         sequence: Tuple[str, Any], vocab: Optional[Tuple[str, Any]]) -> None:
    """The zoo BERT of the file's hidden size and heads (each ``(file key, value)``), with its layer count,
    sequence length and vocabulary."""
    size = zoo_size("bert", hidden[0], hidden[1], {"hidden": as_int(*hidden), "heads": as_int(*heads)})
    draft.set("model.name", "bert")
    draft.set("model.size", size, f"{hidden[0]}: {hidden[1]}, {heads[0]}: {heads[1]}")
    if layers is not None and as_int(*layers) != zoo_layers("bert", size):
        draft.set("model.num_layers", as_int(*layers), f"{layers[0]}: {layers[1]}")
    draft.set("model.sequence_length", as_int(*sequence), f"{sequence[0]}: {sequence[1]}")
    if vocab is not None:
        draft.set("model.vocab_size", as_int(*vocab), f"{vocab[0]}: {vocab[1]}")


def bert_ffn(key: str, value: Any, draft: Draft) -> None:
    """The feed-forward width must be the zoo variant's (BERT's 4 x hidden)."""
    from ipuexp.models.variants import VARIANTS

    ffn = VARIANTS["bert"][draft.values["model.size"]]["ffn"]
    if as_int(key, value) != ffn:
        raise refuse(key, value, f"allowed: {ffn} (the zoo's BERT-{draft.values['model.size']} feed-forward width)")


def mask_tokens(key: str, value: Any, draft: Draft) -> None:
    """Masked positions the MLM head gathers: the zoo's count for the sequence length; another count is a warning
    (the head's cost over a few more or fewer tokens is a small part of a step)."""
    from ipuexp.models.bert import mask_tokens_for

    zoo = mask_tokens_for(int(draft.values["model.sequence_length"]))
    if as_int(key, value) != zoo:
        draft.warnings.append(f"{key}={value}: the zoo's BERT gathers {zoo} masked positions at sequence length "
                              f"{draft.values['model.sequence_length']}; its MLM head is modelled with {zoo}")
    else:
        draft.skip(key)


def stages_of_names(key: str, stages: Any, mapping: Optional[Sequence[int]], layer: str, before: Sequence[str],
                    after: Sequence[str]) -> Tuple[List[int], Optional[List[int]]]:
    """Pipeline stages named by block (``[["emb", "hid", ...], ["hid", ...], ["mlm", "nsp"]]``) as layers per
    stage and the IPU of each stage; a last stage of heads only is the extra stage ``device_mapping`` allows.

    ``layer`` names an encoder layer, ``before`` the blocks the zoo puts before the layers (embeddings) and
    ``after`` those after them (pooler, heads)."""
    if not isinstance(stages, list) or not stages or not all(isinstance(s, list) for s in stages):
        raise refuse(key, stages, "allowed: a list of stages, each a list of block names")
    flat = [str(b) for s in stages for b in s]
    unknown = sorted(set(flat) - {layer, *before, *after})
    if unknown:
        raise refuse(key, unknown[0], f"allowed: {', '.join([layer, *before, *after])}")
    order = [0 if b in before else 1 if b == layer else 2 for b in flat]
    if order != sorted(order):
        raise refuse(key, stages, "allowed: embeddings, then the encoder layers, then the heads (the zoo's order)")
    counts = [sum(1 for b in s if b == layer) for s in stages]
    heads_stage = all(str(b) in after for b in stages[-1]) and len(stages) > 1
    layers_per_stage = counts[:-1] if heads_stage else counts
    ipus = None if mapping is None else as_int_list("device_mapping", mapping)
    if ipus is not None and (len(ipus) != len(stages) or min(ipus) < 0):
        raise refuse("device_mapping", mapping, f"allowed: one IPU index >= 0 per stage ({len(stages)} stages)")
    if heads_stage and ipus is None:
        ipus = list(range(len(layers_per_stage))) + [len(layers_per_stage) - 1]
    return layers_per_stage, ipus


def accumulation_from_global(draft: Draft, key: str, batch_keys: str) -> None:
    """A global batch size (noted as ``_global_batch``) sets the gradient accumulation to global / (micro-batch x
    replicas), as the applications that take one compute it; ``batch_keys`` names their batch keys for the refusal."""
    total = draft.values.pop("_global_batch", None)
    draft.notes.pop("_global_batch", None)
    if total is None:
        return
    per_step = int(draft.values.get("data.micro_batch_size", 1)) * int(draft.values.get("options.replication_factor",
                                                                                          1))
    if total % per_step:
        raise refuse(key, total, f"allowed: a multiple of {batch_keys} ({per_step})")
    draft.set("options.gradient_accumulation", total // per_step,
              f"{key}: {total} / (micro-batch x replicas {per_step})")
