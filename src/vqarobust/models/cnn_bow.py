"""CNN reference model: a small CNN over pixels and a question encoder, fused late or by FiLM.

``fusion="late"`` (the default) encodes the image once, the question as a bag of words,
and combines the two vectors before the classifier. ``fusion="film"`` follows FiLM
(Perez et al., 2018): a GRU reads the question (word order matters for "is the A left
of the B"), and its state scales and shifts the channels of every conv layer, the first
included, and of residual blocks with x/y coordinate channels, so the question selects
what the image encoder looks at. Late fusion cannot answer "what colour is the star" in a
scene of several objects; FiLM can.

Registered with the transformers Auto classes, so ``AutoConfig`` and
``AutoModelForVisualQuestionAnswering.from_pretrained(path)`` load a saved checkpoint
without ``trust_remote_code``, through the same code path as any Hub classifier.
"""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForVisualQuestionAnswering, PretrainedConfig
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.modeling_utils import PreTrainedModel

FUSIONS = ("late", "film")


class CnnBowConfig(PretrainedConfig):
    """Hyper-parameters of :class:`CnnBowForQuestionAnswering`."""

    model_type = "vqarobust-cnn-bow"

    # A transformers config is rebuilt from its saved keys through this constructor, one
    # keyword per key: like a dataclass's, its parameters are its fields.
    def __init__(  # noqa: PLR0913
        self,
        vocab_size: int = 128,
        channels: list[int] | None = None,
        embed_dim: int = 64,
        hidden_dim: int = 128,
        num_channels: int = 3,
        pool_size: int = 4,
        fusion: str = "late",
        film_blocks: int = 2,
        first_stride: int = 1,
        **kwargs,
    ) -> None:
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, not {fusion!r}")
        self.vocab_size = vocab_size
        self.channels = list(channels or [16, 32, 64])
        self.embed_dim = embed_dim
        self.hidden_dim = hidden_dim
        self.num_channels = num_channels
        self.pool_size = pool_size
        self.fusion = fusion
        self.film_blocks = film_blocks
        self.first_stride = first_stride
        super().__init__(**kwargs)


def _with_coords(x: torch.Tensor) -> torch.Tensor:
    """``x`` with two more channels: the x and y position of each cell in [-1, 1]."""
    n, _, h, w = x.shape
    ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype, device=x.device)
    xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype, device=x.device)
    grid = torch.stack(torch.meshgrid(xs, ys, indexing="xy")).expand(n, 2, h, w)
    return torch.cat([x, grid], dim=1)


class FilmConv(nn.Module):
    """A stem layer under FiLM: 3x3 conv, BN without affine, FiLM, ReLU, 2x max-pool."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(out_ch, affine=False)

    def forward(self, x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """``x`` convolved, modulated per channel by the question's ``gamma``, ``beta``."""
        h = self.norm(self.conv(x))
        return nn.functional.max_pool2d(torch.relu(_film(h, gamma, beta)), 2)


class FilmBlock(nn.Module):
    """FiLM's residual block: 1x1 conv, 3x3 conv, BN without affine, FiLM, ReLU, + input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels + 2, channels, 1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels, affine=False)

    def forward(self, x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """``x`` plus its residual, modulated per channel by the question's ``gamma``, ``beta``."""
        h = torch.relu(self.conv1(_with_coords(x)))
        h = self.norm(self.conv2(h))
        return x + torch.relu(_film(h, gamma, beta))


def _film(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    # gamma is predicted as an offset from 1 so that training starts near the identity.
    return (1.0 + gamma[:, :, None, None]) * x + beta[:, :, None, None]


class CnnBowForQuestionAnswering(PreTrainedModel):
    """Conv-BN-ReLU image encoder and a question encoder, fused late or by FiLM."""

    config_class = CnnBowConfig
    main_input_name = "pixel_values"
    base_model_prefix = "cnn_bow"

    def __init__(self, config: CnnBowConfig) -> None:
        super().__init__(config)
        hidden = config.hidden_dim
        widths = [config.num_channels, *config.channels]
        if config.fusion == "film":
            self.word_embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=0)
            # The question conditions the first layer already: picking "the red object"
            # out of the pixels is then one channel's gain, and the later layers see
            # mostly what the question is about (docs/models.md).
            strides = [config.first_stride] + [1] * (len(widths) - 2)
            self.stem = nn.ModuleList(
                FilmConv(i, o, st) for (i, o), st in zip(pairwise(widths), strides, strict=True)
            )
            last = widths[-1]
            self.blocks = nn.ModuleList(FilmBlock(last) for _ in range(config.film_blocks))
            self.film_sizes = [*config.channels, *[last] * config.film_blocks]
            self.question_encoder = nn.GRU(config.embed_dim, hidden, batch_first=True)
            self.film = nn.Linear(hidden, 2 * sum(self.film_sizes))
            self.head = nn.Conv2d(last + 2, hidden, 1)
            self.classifier = nn.Sequential(
                nn.Linear(hidden, hidden),
                nn.ReLU(inplace=True),
                nn.Linear(hidden, config.num_labels),
            )
        else:
            layers: list[nn.Module] = []
            for n, (in_ch, out_ch) in enumerate(pairwise(widths)):
                stride = config.first_stride if n == 0 else 1
                layers += [
                    nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False),
                    nn.BatchNorm2d(out_ch),
                    nn.ReLU(inplace=True),
                    nn.MaxPool2d(2),
                ]
            # Pool to a small grid rather than to one vector: telling a triangle from a
            # rectangle needs the layout of edges, and any input size still works.
            pool = config.pool_size
            self.image_encoder = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(pool), nn.Flatten())
            self.image_proj = nn.Linear(widths[-1] * pool * pool, hidden)
            # Created in this order so that a seed initialises a late-fusion model exactly
            # as before FiLM existed (trained reference models stay reproducible).
            self.word_embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=0)
            self.text_proj = nn.Linear(config.embed_dim, hidden)
            self.classifier = nn.Sequential(
                nn.Linear(3 * hidden, hidden),
                nn.ReLU(inplace=True),
                nn.Linear(hidden, config.num_labels),
            )
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if self.config.fusion == "film" and hasattr(module, "reset_parameters"):
            # PyTorch's own initialisation, not transformers' N(0, 0.02): with word vectors
            # that small every question starts as nearly the same FiLM vector, and the
            # model never left the answer priors in a trial here (docs/models.md).
            module.reset_parameters()
            return
        super()._init_weights(module)

    @property
    def image_features_shared(self) -> bool:
        """Whether questions about one image can share its encoding (late fusion only)."""
        return self.config.fusion == "late"

    def encode_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Question-independent image features, one row per image (late fusion only: under
        FiLM every layer depends on the question)."""
        if self.config.fusion == "film":
            raise ValueError("a FiLM model has no question-independent image features")
        return torch.relu(self.image_proj(self.image_encoder(pixel_values)))

    def _film_logits(
        self, pixel_values: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(
            self.word_embeddings(input_ids), lengths, batch_first=True, enforce_sorted=False
        )
        # The state after the last real token: padding never reaches the question vector.
        question = self.question_encoder(packed)[1][0]
        gammas, betas = self.film(question).chunk(2, dim=1)
        params = zip(gammas.split(self.film_sizes, 1), betas.split(self.film_sizes, 1), strict=True)
        x = pixel_values
        for layer, (gamma, beta) in zip([*self.stem, *self.blocks], params, strict=True):
            x = layer(x, gamma, beta)
        pooled = torch.relu(self.head(_with_coords(x))).amax(dim=(2, 3))
        return self.classifier(pooled)

    def forward(
        self,
        input_ids: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        image_index: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        **unused: object,
    ) -> SequenceClassifierOutput:
        """Logits over ``config.id2label``; cross-entropy loss when ``labels`` are given.

        Pass one ``pixel_values`` row per distinct image and ``image_index`` mapping each
        question to its image's row: late fusion then encodes each image once. Without
        ``image_index``, row i belongs to question i. A late-fusion model also takes
        ``image_features`` instead of pixels: rows of :meth:`encode_images` computed
        earlier (an inference loop encodes each image once for all its questions).
        """
        if (pixel_values is None) == (image_features is None):
            raise ValueError("pass pixel_values or image_features, one of them")
        if attention_mask is None:
            attention_mask = (input_ids != 0).long()
        if self.config.fusion == "film":
            if image_features is not None:
                raise ValueError("a FiLM model has no question-independent image features")
            if image_index is not None:
                pixel_values = pixel_values[image_index]
            logits = self._film_logits(pixel_values, input_ids, attention_mask)
        else:
            img = self.encode_images(pixel_values) if image_features is None else image_features
            if image_index is not None:
                img = img[image_index]
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
