"""Packed BERT: a packed micro-batch gives the loss and gradients of the same sequences unpacked (same weights), to
numerical precision; the packed model trains as the unpacked one does."""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch

from ipuexp.models.bert import IGNORE, block_mask, build_bert

SEQ, MASKED = 16, 2
HP = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 50, "max_positions": SEQ, "sequence_length": SEQ}


def _models(per_pack: int) -> Tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    plain = build_bert({**HP, "mask_tokens": MASKED}).double().eval()
    packed = build_bert({**HP, "mask_tokens": per_pack * MASKED, "sequences_per_pack": per_pack}).double().eval()
    packed.load_state_dict(plain.state_dict())
    return plain, packed


def _sequences(lengths: List[int], seed: int) -> List[Dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in lengths:
        ids = torch.randint(0, HP["vocab"], (n,), generator=g)
        types = (torch.arange(n) >= n // 2).long()
        out.append({"ids": ids, "types": types, "mlm": torch.randint(0, HP["vocab"], (MASKED,), generator=g),
                    "nsp": torch.randint(0, 2, (), generator=g)})
    return out


def _unpacked(seqs: List[Dict[str, torch.Tensor]]) -> Tuple[torch.Tensor, ...]:
    """One row per sequence, padded; the masked-LM head runs on each row's first MASKED positions."""
    rows = len(seqs)
    ids, types, mask = (torch.zeros(rows, SEQ, dtype=torch.long) for _ in range(3))
    for r, s in enumerate(seqs):
        n = len(s["ids"])
        ids[r, :n], types[r, :n], mask[r, :n] = s["ids"], s["types"], 1
    mlm = torch.stack([s["mlm"] for s in seqs])
    nsp = torch.stack([s["nsp"] for s in seqs])
    return ids, types, mask, mlm, nsp


def _packed(packs: List[List[Dict[str, torch.Tensor]]], per_pack: int) -> Tuple[torch.Tensor, ...]:
    """Sequences one after another in each row, each with its own positions and index; empty slots labelled -100."""
    rows = len(packs)
    ids, types, positions, sequence = (torch.zeros(rows, SEQ, dtype=torch.long) for _ in range(4))
    mlm_pos = torch.zeros(rows, per_pack * MASKED, dtype=torch.long)
    mlm = torch.full((rows, per_pack * MASKED), IGNORE, dtype=torch.long)
    cls = torch.zeros(rows, per_pack, dtype=torch.long)
    nsp = torch.full((rows, per_pack), IGNORE, dtype=torch.long)
    for r, pack in enumerate(packs):
        start = 0
        for k, s in enumerate(pack):
            n = len(s["ids"])
            span = slice(start, start + n)
            ids[r, span], types[r, span] = s["ids"], s["types"]
            positions[r, span], sequence[r, span] = torch.arange(n), k + 1
            slots = slice(k * MASKED, (k + 1) * MASKED)
            mlm_pos[r, slots], mlm[r, slots] = torch.arange(start, start + MASKED), s["mlm"]
            cls[r, k], nsp[r, k] = start, s["nsp"]
            start += n
    return ids, types, positions, sequence, mlm_pos, cls, mlm, nsp


def _loss_and_grads(model: torch.nn.Module, inputs: Tuple[torch.Tensor, ...]) -> Tuple[float, Dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(*inputs)[0]
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_block_mask_keeps_each_sequence_to_itself() -> None:
    mask = block_mask(torch.tensor([[1, 1, 2, 0]]), torch.float32)[0, 0]
    assert (mask == 0).tolist() == [[True, True, False, False], [True, True, False, False],
                                    [False, False, True, False], [False, False, False, False]]


@pytest.mark.parametrize("layout", [[[5, 7, 4]], [[6, 9], [3, 5, 8]]])
def test_packed_gives_the_loss_and_gradients_of_unpacked(layout: List[List[int]]) -> None:
    """Three sequences in one pack, and five in two packs (one slot left empty): the same loss and parameter
    gradients as one row per sequence."""
    plain, packed = _models(per_pack=3)
    packs = []
    seed = 0
    for lengths in layout:
        packs.append(_sequences(lengths, seed))
        seed += 1
    flat = [s for pack in packs for s in pack]
    loss_u, grads_u = _loss_and_grads(plain, _unpacked(flat))
    loss_p, grads_p = _loss_and_grads(packed, _packed(packs, per_pack=3))
    assert loss_p == pytest.approx(loss_u, rel=1e-12)
    assert grads_u.keys() == grads_p.keys()
    for name in grads_u:
        torch.testing.assert_close(grads_p[name], grads_u[name], rtol=1e-9, atol=1e-12, msg=name)


def test_packed_training_follows_unpacked() -> None:
    """SGD on the same sequences, packed and unpacked: the same weights after every step, and the loss falls."""
    plain, packed = _models(per_pack=3)
    packs = [_sequences([5, 7, 4], 10), _sequences([6, 9], 11)]
    flat = [s for pack in packs for s in pack]
    unpacked_in, packed_in = _unpacked(flat), _packed(packs, per_pack=3)
    opt_u = torch.optim.SGD(plain.parameters(), lr=0.5)
    opt_p = torch.optim.SGD(packed.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        for model, opt, inputs in ((plain, opt_u, unpacked_in), (packed, opt_p, packed_in)):
            opt.zero_grad()
            loss = model(*inputs)[0]
            loss.backward()
            opt.step()
        losses.append(loss.item())
    for (name, a), b in zip(plain.named_parameters(), packed.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-10, msg=name)
    assert losses[-1] < 0.5 * losses[0]


def test_split_layers_compute_the_same_model() -> None:
    """Attention and feed-forward as blocks of their own (att_ffn_placement): the same loss and gradients as whole
    layers with the same weights."""
    torch.manual_seed(0)
    whole = build_bert({**HP, "mask_tokens": MASKED}).double().eval()
    split = build_bert({**HP, "mask_tokens": MASKED, "split_layers": True}).double().eval()
    assert [b.name for b in split.blocks][1:5] == ["layer0_attention", "layer0_ffn", "layer1_attention", "layer1_ffn"]
    state = {}
    for name, value in whole.state_dict().items():
        parts = name.split(".")  # blocks.<i>.module.<param...>
        i = int(parts[1])
        if 1 <= i <= HP["layers"]:
            layer, rest = i - 1, ".".join(parts[3:])
            half = 0 if rest.startswith(("attention", "dropout")) else 1
            rest = rest.replace("attention_norm", "norm").replace("output_norm", "norm")
            state[f"blocks.{1 + 2 * layer + half}.module.{rest}"] = value
        else:
            state[f"blocks.{i if i == 0 else i + HP['layers']}.module.{'.'.join(parts[3:])}"] = value
    split.load_state_dict(state)
    inputs = _unpacked(_sequences([9, 12, 16], 3))
    loss_w, _ = _loss_and_grads(whole, inputs)
    loss_s, _ = _loss_and_grads(split, inputs)
    assert loss_s == pytest.approx(loss_w, rel=1e-12)
