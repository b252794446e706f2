"""Vision Transformer (Dosovitskiy et al. 2021) for image classification, split as Graphcore's PopTorch ViT
(examples vision/vit/pytorch): patch embeddings block, one block per encoder layer, classifier head block.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.transformer import Dropout, PreNormLayer, init_weights

# graphcore/examples@3cc8f81 vision/vit/pytorch/configs.yml `defaults`:
# layer_norm_eps 1e-6, hidden_dropout_prob 0.1, attention_probs_dropout_prob 0.0.
LAYER_NORM_EPS = 1e-6
HIDDEN_DROPOUT = 0.1
ATTENTION_DROPOUT = 0.0


class PatchEmbeddings(nn.Module):
    """Non-overlapping patch projection (a strided convolution), class token, position embeddings, dropout."""

    def __init__(self, hidden: int, patch: int, image_size: int, channels: int = 3) -> None:
        super().__init__()
        patches = (image_size // patch) ** 2
        self.projection = nn.Conv2d(channels, hidden, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.position = nn.Parameter(torch.zeros(1, patches + 1, hidden))
        self.dropout = Dropout(HIDDEN_DROPOUT)
        if self.position.device.type != "meta":
            # truncated N(0, 0.02) as in the reference ViT implementation (Hugging Face ViTEmbeddings)
            nn.init.trunc_normal_(self.position, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)

    def forward(self, images: torch.Tensor, *labels: Any) -> Tuple[Any, ...]:
        x = self.projection(images).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.position
        return (self.dropout(x), *labels)


class ClassifierHead(nn.Module):
    """Final LayerNorm and a linear classifier on the class token; returns (loss, logits)."""

    def __init__(self, hidden: int, classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        logits = self.classifier(self.norm(hidden)[:, 0])
        return F.cross_entropy(logits, labels.long()), logits


def build_vit(hp: Dict[str, Any], name: str = "vit") -> PipelinedModel:
    """ViT from a variant's hyper-parameters (see ``variants.VARIANTS['vit']``)."""
    hidden, image = hp["hidden"], hp["image_size"]
    blocks = [Block("embeddings", PatchEmbeddings(hidden, hp["patch"], image))]
    for i in range(hp["layers"]):
        layer = PreNormLayer(hidden, hp["heads"], hp["ffn"], HIDDEN_DROPOUT, ATTENTION_DROPOUT, LAYER_NORM_EPS)
        blocks.append(Block(f"layer{i}", layer, is_layer=True))
    blocks.append(Block("head", ClassifierHead(hidden, hp["classes"])))
    spec = [
        InputSpec("images", (3, image, image), "float32"),
        InputSpec("labels", (), "int32", is_label=True, high=hp["classes"]),
    ]
    hparams = {**hp, "layer_norm_eps": LAYER_NORM_EPS, "hidden_dropout": HIDDEN_DROPOUT,
               "attention_dropout": ATTENTION_DROPOUT}
    model = PipelinedModel(blocks, name=name, input_spec=spec, hparams=hparams)
    init_weights(model)
    return model
