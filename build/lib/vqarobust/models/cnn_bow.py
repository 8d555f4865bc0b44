"""Late-fusion reference model: a small CNN over pixels and a bag of words over the question.

Registered with the transformers Auto classes, so ``AutoConfig`` and
``AutoModelForVisualQuestionAnswering.from_pretrained(path)`` load a saved checkpoint
without ``trust_remote_code``, through the same code path as any Hub classifier.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForVisualQuestionAnswering, PretrainedConfig
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.modeling_utils import PreTrainedModel


class CnnBowConfig(PretrainedConfig):
    """Hyper-parameters of :class:`CnnBowForQuestionAnswering`."""

    model_type = "vqarobust-cnn-bow"

    def __init__(
        self,
        vocab_size: int = 128,
        channels: list[int] | None = None,
        embed_dim: int = 64,
        hidden_dim: int = 128,
        num_channels: int = 3,
        pool_size: int = 4,
        **kwargs,
    ) -> None:
        self.vocab_size = vocab_size
        self.channels = list(channels or [16, 32, 64])
        self.embed_dim = embed_dim
        self.hidden_dim = hidden_dim
        self.num_channels = num_channels
        self.pool_size = pool_size
        super().__init__(**kwargs)


class CnnBowForQuestionAnswering(PreTrainedModel):
    """Conv-BN-ReLU image encoder + mean word embedding, fused by concat and product."""

    config_class = CnnBowConfig
    main_input_name = "pixel_values"
    base_model_prefix = "cnn_bow"

    def __init__(self, config: CnnBowConfig) -> None:
        super().__init__(config)
        layers: list[nn.Module] = []
        in_ch = config.num_channels
        for out_ch in config.channels:
            layers += [
                nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False),
                nn.BatchNorm2d(out_ch),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            in_ch = out_ch
        # Pool to a small grid rather than to one vector: telling a triangle from a
        # rectangle needs the layout of edges, and any input size still works.
        pool = config.pool_size
        self.image_encoder = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(pool), nn.Flatten())
        self.image_proj = nn.Linear(in_ch * pool * pool, config.hidden_dim)
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=0)
        self.text_proj = nn.Linear(config.embed_dim, config.hidden_dim)
        self.classifier = nn.Sequential(
            nn.Linear(3 * config.hidden_dim, config.hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(config.hidden_dim, config.num_labels),
        )
        self.post_init()

    def encode_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Image features, one row per image."""
        return torch.relu(self.image_proj(self.image_encoder(pixel_values)))

    def forward(
        self,
        input_ids: torch.Tensor,
        pixel_values: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        image_index: torch.Tensor | None = None,
        **unused: object,
    ) -> SequenceClassifierOutput:
        """Logits over ``config.id2label``; cross-entropy loss when ``labels`` are given.

        Late fusion lets an image be encoded once for all of its questions: pass one
        ``pixel_values`` row per distinct image and ``image_index`` mapping each question
        to its image's row. Without ``image_index``, row i belongs to question i.
        """
        img = self.encode_images(pixel_values)
        if image_index is not None:
            img = img[image_index]
        if attention_mask is None:
            attention_mask = (input_ids != 0).long()
        mask = attention_mask.unsqueeze(-1).to(img.dtype)
        words = (self.word_embeddings(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        txt = torch.relu(self.text_proj(words))
        logits = self.classifier(torch.cat([img, txt, img * txt], dim=-1))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


AutoConfig.register(CnnBowConfig.model_type, CnnBowConfig, exist_ok=True)
AutoModelForVisualQuestionAnswering.register(
    CnnBowConfig, CnnBowForQuestionAnswering, exist_ok=True
)
