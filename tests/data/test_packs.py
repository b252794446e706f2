"""Synthetic packs for the functional engine's packed BERT: real packs, laid out as the model reads them."""
from __future__ import annotations

from types import SimpleNamespace

from ipuexp.data.datasets import PACKED_INPUTS, packs


def _spec(seq: int = 32, masked: int = 8, per_pack: int = 3):
    shapes = {"input_ids": (seq,), "token_type_ids": (seq,), "position_ids": (seq,), "sequence_ids": (seq,),
              "mlm_positions": (masked,), "cls_positions": (per_pack,), "mlm_labels": (masked,),
              "nsp_labels": (per_pack,)}
    highs = {"input_ids": 100, "token_type_ids": 2, "mlm_labels": 100, "nsp_labels": 2}
    return [SimpleNamespace(name=n, shape=shapes[n], high=highs.get(n)) for n in PACKED_INPUTS]


def test_packs_hold_whole_sequences_each_with_its_own_positions() -> None:
    import torch

    g = torch.Generator().manual_seed(0)
    data = dict(zip(PACKED_INPUTS, packs(_spec(), 64, g)))
    counts = set()
    for r in range(64):
        ids, pos = data["sequence_ids"][r].tolist(), data["position_ids"][r].tolist()
        used = [i for i in ids if i]
        counts.add(max(used))
        assert used == sorted(used) and ids[len(used):] == [0] * (len(ids) - len(used))  # padding at the end
        for k in range(1, max(used) + 1):
            span = [p for i, p in zip(ids, pos) if i == k]
            assert span == list(range(len(span)))  # positions restart for each sequence
            start = ids.index(k)
            assert data["cls_positions"][r, k - 1] == start and data["nsp_labels"][r, k - 1] in (0, 1)
        for slot, p in enumerate(data["mlm_positions"][r].tolist()):
            label = int(data["mlm_labels"][r, slot])
            assert (label == -100) or (0 <= label < 100 and ids[p] > 0)  # masked tokens belong to a sequence
        assert all(int(x) == -100 for x in data["nsp_labels"][r, max(used):])
    assert counts == {1, 2, 3}
