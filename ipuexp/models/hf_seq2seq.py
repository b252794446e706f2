"""An encoder-decoder (T5, mT5, BART, Whisper) as one chain of blocks, as Optimum Graphcore's pipelined models place
it: the encoder's layers, then the decoder's, which ``layers_per_ipu`` counts in that order.

- ``embeddings`` (IPU 0): the encoder up to its first layer (the shared token embedding, or Whisper's two
  convolutions and positions) and the decoder's token embedding, which Optimum computes on IPU 0 beside it;
- the encoder's layers, each handing on what its loop carries (T5's relative position bias);
- ``decoder``: the encoder's tail (its final norm) and the decoder up to its first layer, with the encoder's output
  as ``encoder_hidden_states``. It joins the last encoder layer's stage;
- the decoder's layers: every one receives the encoder's output, a real tensor that each decoder stage holds and
  that the pipeline copies from IPU to IPU;
- ``heads``: the decoder's tail, the task model's LM head (T5's scaled, tied head; BART's logit bias) and loss.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.hf_chain import Context, Layer, carried, layer_arity, layer_list, probe, ran_before, run_layer
from ipuexp.models.hf_inputs import input_specs, task_labels
from ipuexp.models.hf_source import HFSource
from ipuexp.models.hf_task import TaskHead
from ipuexp.models.spec import ModelNode


class EncoderDecoderEmbeddings(nn.Module):
    """The encoder up to its first layer and the decoder's token embedding; passes the encoder's padding mask (for
    the decoder's cross-attention) and the labels on."""

    def __init__(self, encoder: nn.Module, layers: Tuple[nn.Module, str], embed: nn.Module, parts: List[nn.Module],
                 input_names: List[str], context: Context) -> None:
        super().__init__()
        self.parts = nn.ModuleList([*parts, embed])
        self.input_names = list(input_names)
        self.__dict__.update(_encoder=encoder, _layers=layers, _embed=embed, _context=context)

    def forward(self, *inputs: Any) -> Tuple[Any, ...]:
        n = len(self.input_names)
        named = dict(zip(self.input_names, inputs[:n]))
        hidden, args, kwargs = probe(self._encoder, self._layers, named)
        decoder_embeds = self._embed(inputs[n])
        mask = (named["attention_mask"],) if "attention_mask" in named else ()
        return (hidden, *self._context.flatten(args, kwargs), decoder_embeds, *mask, *inputs[n + 1:])


class DecoderEntry(nn.Module):
    """The encoder's tail (final norm) and the decoder up to its first layer."""

    def __init__(self, decoder: nn.Module, layers: Tuple[nn.Module, str], tail: List[nn.Module],
                 parts: List[nn.Module], encoder_context: Context, context: Context, masked: bool) -> None:
        super().__init__()
        self.tail, self.parts = nn.ModuleList(tail), nn.ModuleList(parts)
        self.masked = masked
        self.__dict__.update(_decoder=decoder, _layers=layers, _before=encoder_context, _context=context)

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        after = rest[self._before.width:]
        for module in self.tail:
            hidden = module(hidden)
        call: Dict[str, Any] = {"inputs_embeds": after[0], "encoder_hidden_states": hidden, "use_cache": False}
        if self.masked:
            call["encoder_attention_mask"] = after[1]
        hidden, args, kwargs = probe(self._decoder, self._layers, call)
        return (hidden, *self._context.flatten(args, kwargs), *after[1 + self.masked:])



def _tail(stack: nn.Module, layers: nn.ModuleList, ran: set) -> List[nn.Module]:
    """A stack's modules with parameters that neither ran before its layers nor are them: its final norms."""
    return [m for _, m in stack.named_children()
            if m is not layers and id(m) not in ran and any(True for _ in m.parameters())
            and not any(c is layers for c in m.modules())]


def build_seq2seq(model: nn.Module, source: HFSource, model_cfg: ModelNode, task: str, what: str
                  ) -> PipelinedModel:
    encoder, decoder = model.get_encoder(), model.get_decoder()
    enc_parent, enc_name, enc_layers = layer_list(encoder, f"{what} encoder")
    dec_parent, dec_name, dec_layers = layer_list(decoder, f"{what} decoder")
    seq = int(getattr(model_cfg, "sequence_length", 128))
    target = int(getattr(model_cfg.hf, "target_length", 128))
    limit = getattr(model.config, "max_target_positions", None)
    if target < 1 or (isinstance(limit, int) and target > limit):
        raise ValueError(f"model.hf.target_length: {target} is not allowed; allowed: 1 to {limit or 'any'} "
                         f"for {source.label} (its decoder's positions)")
    inputs = input_specs(source, model, encoder, False, seq, model_cfg)
    embed = decoder.get_input_embeddings()
    decoder_ids = InputSpec("decoder_input_ids", (target,), "int32", high=int(embed.num_embeddings))
    example = {s.name: torch.zeros((1, *s.shape), dtype=getattr(torch, s.dtype)) for s in inputs}
    masked = "attention_mask" in example

    enc_ctx, dec_ctx = Context(), Context()
    hidden, args, kwargs, enc_ran = ran_before(encoder, (enc_parent, enc_name), example, what)
    enc_ctx.flatten(args, kwargs)
    carried(encoder, (enc_parent, enc_name), example, enc_ctx)
    enc_arity = layer_arity(enc_layers[0], hidden, args, kwargs)
    for layer in enc_layers:  # the encoder's output, for the decoder's probe
        out = run_layer(layer, hidden, args, kwargs)
        hidden = out[0] if isinstance(out, tuple) else out
    enc_tail = _tail(encoder, enc_layers, enc_ran)
    for module in enc_tail:
        hidden = module(hidden)
    call = {"inputs_embeds": embed(torch.zeros((1, target), dtype=torch.int32)), "encoder_hidden_states": hidden,
            "use_cache": False, **({"encoder_attention_mask": example["attention_mask"]} if masked else {})}
    dec_hidden, args, kwargs, dec_ran = ran_before(decoder, (dec_parent, dec_name), call, what)
    dec_ctx.flatten(args, kwargs)
    carried(decoder, (dec_parent, dec_name), call, dec_ctx)
    dec_arity = layer_arity(dec_layers[0], dec_hidden, args, kwargs)

    enc_parts = [m for m in encoder.modules() if id(m) in enc_ran and m is not encoder]
    dec_parts = [m for m in decoder.modules() if id(m) in dec_ran and m is not decoder and m is not embed]
    blocks = [Block("embeddings", EncoderDecoderEmbeddings(encoder, (enc_parent, enc_name), embed, enc_parts,
                                                           [s.name for s in inputs], enc_ctx))]
    blocks += [Block(f"layer{i}", Layer(layer, enc_ctx, first=i == 0), is_layer=True)
               for i, layer in enumerate(enc_layers)]
    blocks.append(Block("decoder", DecoderEntry(decoder, (dec_parent, dec_name), enc_tail, dec_parts, enc_ctx,
                                                dec_ctx, masked)))
    blocks += [Block(f"layer{len(enc_layers) + i}", Layer(layer, dec_ctx, first=i == 0), is_layer=True)
               for i, layer in enumerate(dec_layers)]
    kind, labels = task_labels(task, model, dec_hidden, seq, 0, target)
    lists = [(enc_parent, enc_name, enc_arity), (dec_parent, dec_name, dec_arity)]
    blocks.append(Block("heads", TaskHead(model, lists, [*inputs, decoder_ids], [s.name for s in labels],
                                          dec_ctx.width, kind, extra={"use_cache": False})))
    hparams = {"hf_config": source.label, "hf_task": task, "model_type": source.model_type,
               "layers": len(enc_layers) + len(dec_layers), "encoder_layers": len(enc_layers),
               "decoder_layers": len(dec_layers), "target_length": target,
               "transformers_class": type(model).__name__}
    pipelined = PipelinedModel(blocks, name=f"hf:{source.label}", input_spec=[*inputs, decoder_ids, *labels],
                               hparams=hparams)
    pipelined.__dict__["transformers_model"] = model
    return pipelined
