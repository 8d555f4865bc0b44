"""PNP-VQA (Tiong et al., 2022), rebuilt from Hugging Face components with transformers only.

A zero-shot pipeline of three frozen models, as in Salesforce LAVIS's ``pnp_vqa`` with the
settings of its VQAv2 evaluation (``vqav2_eval_large.yaml``):

1. **Image-question matching** (BLIP ITM, ``Salesforce/blip-itm-large-coco``): the question
   (lower-cased, ``.!"()*#:;~`` removed, ``?`` stripped) is matched to the image; GradCAM
   on the cross-attention of text-encoder block 7 (attention x positive gradient of the
   ITM "match" logit, averaged over heads and over the question's tokens) scores each
   image patch (:func:`gradcam_relevance`).
2. **Question-guided captions** (BLIP captioning, ``Salesforce/blip-image-captioning-large``):
   for each caption, 20 patches are drawn without replacement with probability
   proportional to their relevance, and the caption decoder sees only those patches'
   features; it samples (top-k 50, top-p 1, 10-20 tokens including the prompt
   ``a picture of``) until there are 100 distinct captions (a caption contained in one
   already kept is dropped).
3. **Answering** (UnifiedQA-v2, ``allenai/unifiedqa-v2-t5-large-1363200``) with
   fusion-in-decoder: each ``question \\n caption.`` pair is encoded separately, the
   encoder states are concatenated and the decoder answers greedily (up to 20 tokens)
   while attending to all of them (:func:`fid_generate`).

Where this differs from LAVIS (docs/models.md lists the same):

* Sampling is seeded per item: patches and captions of a question come from a generator
  seeded by (seed, question, image pixels), so an answer does not depend on the batch,
  job or shard; LAVIS draws from one global stream per run.
* LAVIS resamples until every image has 100 distinct captions, which never ends for a
  captioner that repeats itself; here at most ``max_caption_rounds`` rounds (default 10)
  are drawn and a question that ends with fewer answers from those (a logged warning).
* A patch with zero relevance can still be drawn once every patch with positive
  relevance is taken (LAVIS's ``torch.multinomial`` fails then), and a question with no
  tokens between [CLS] and [SEP] counts as one token instead of dividing by zero.
* BLIP's ITM reads an ``[ENC]`` token in the first position (LAVIS does this,
  transformers' ``BlipForImageTextRetrieval.forward`` does not): the tokenizer's ``[ENC]``
  if it has one, else the id after ``[DEC]`` where LAVIS's tokenizer put it, or
  ``pnp.enc_token_id``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from vqarobust.models import SMALL_BATCH_SIZE
from vqarobust.models.base import GeneratesReplies, SharesImageFeatures, VQAModel, torch_dtype
from vqarobust.models.loading import (
    Loading,
    check_safetensors,
    resolve_weights,
    safetensors_option,
)

log = logging.getLogger(__name__)

# LAVIS's PNP-VQA VQAv2 settings (lavis/projects/pnp-vqa/eval/vqav2_eval_large.yaml and
# the BLIP ITM model's max_txt_len); max_caption_rounds and enc_token_id are ours.
DEFAULTS: dict[str, Any] = {
    "block_num": 7,
    "itm_max_length": 35,
    "num_patches": 20,
    "num_captions": 100,
    "caption_prompt": "a picture of ",
    "cap_min_length": 10,
    "cap_max_length": 20,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
    "max_caption_rounds": 10,
    "num_captions_fid": 1,
    "qa_min_length": 0,
    "qa_max_length": 20,
    "num_beams": 1,
    "enc_token_id": None,
}

_QUESTION_PUNCT = re.compile(r"[.!\"()*#:;~]")


def normalize_question(question: str, max_words: int = 50) -> str:
    """LAVIS's ``blip_question`` processing: lower case, ``.!"()*#:;~`` removed, trailing
    spaces stripped, at most ``max_words`` words."""
    text = _QUESTION_PUNCT.sub("", question.lower()).rstrip(" ")
    words = text.split(" ")
    return " ".join(words[:max_words]) if len(words) > max_words else text


def gradcam_relevance(
    attention: torch.Tensor, gradients: torch.Tensor, text_mask: torch.Tensor
) -> torch.Tensor:
    """Per image patch, its GradCAM relevance to the question.

    ``attention`` and ``gradients`` are the cross-attention probabilities of one text
    block and their gradients, (batch, heads, text tokens, 1 + patches) with the image's
    [CLS] first; ``text_mask`` is the (batch, text tokens) padding mask. Relevance is
    attention x positive gradient on real tokens, averaged over heads, then over the
    question's tokens (those between the first token and [SEP]): (batch, patches).
    """
    mask = text_mask[:, None, :, None].to(attention.dtype)
    cam = attention[..., 1:] * mask * (gradients[..., 1:].clamp(min=0) * mask)
    cam = cam.mean(dim=1)  # over heads: (batch, tokens, patches)
    lengths = (text_mask.sum(dim=1) - 2).clamp(min=1)
    positions = torch.arange(cam.shape[1], device=cam.device)
    inside = (positions[None, :] >= 1) & (positions[None, :] <= lengths[:, None])
    return (cam * inside[..., None]).sum(dim=1) / lengths[:, None].to(cam.dtype)


def sample_patches(
    relevance: torch.Tensor, num_sets: int, num_patches: int, generator: torch.Generator
) -> torch.Tensor:
    """``num_sets`` sets of ``num_patches`` distinct patches, drawn with probability
    proportional to ``relevance`` (patches,), each sorted: (num_sets, num_patches) indices
    of patches (0 = first patch, not the image's [CLS]).

    Patches with zero relevance get the smallest positive weight, so they are drawn only
    after every patch with positive relevance (uniformly among themselves).
    """
    if num_patches > relevance.numel():
        raise ValueError(
            f"num_patches {num_patches} exceeds the image's {relevance.numel()} patches"
        )
    weights = relevance.detach().float().cpu().clamp(min=0)
    weights = torch.where(weights > 0, weights, torch.finfo(torch.float32).tiny)
    rows = weights.expand(num_sets, -1)
    return torch.multinomial(rows, num_patches, generator=generator).sort(dim=1).values


def keep_new_captions(kept: list[str], new: Sequence[str], limit: int) -> list[str]:
    """``kept`` extended by the captions of ``new`` that no kept caption contains, up to
    ``limit`` (LAVIS's rule: a caption that is a substring of a kept one adds nothing)."""
    out = list(kept)
    for caption in new:
        if len(out) >= limit:
            break
        if caption and not any(caption in other for other in out):
            out.append(caption)
    return out


def qa_contexts(question: str, captions: Sequence[str], per_context: int = 1) -> list[str]:
    """UnifiedQA inputs of one question: ``question \\n caption. caption. ...`` with
    ``per_context`` captions each (the literal backslash-n is UnifiedQA's separator)."""
    q = question.lower().strip()
    out = []
    for start in range(0, len(captions), per_context):
        text = "".join(c.strip() + ". " for c in captions[start : start + per_context])
        out.append(f"{q} \\n {text.lower().strip()}")
    return out


def fid_encode(model: Any, tokenizer: Any, contexts: Sequence[Sequence[str]]) -> tuple[Any, Any]:
    """Fusion-in-decoder encoding: each context of each question through the T5 encoder on
    its own, the states of a question's contexts concatenated along the sequence.

    Returns (states, mask) of shape (questions, contexts x length, width) and
    (questions, contexts x length). Questions may have different numbers of contexts; the
    missing ones are masked out.
    """
    n = max(len(c) for c in contexts)
    flat = [ctx for cs in contexts for ctx in list(cs) + [""] * (n - len(cs))]
    enc = tokenizer(flat, padding="longest", truncation=True, return_tensors="pt")
    device = next(model.parameters()).device
    ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
    present = torch.tensor([[i < len(cs) for i in range(n)] for cs in contexts], device=device)
    mask = mask * present.reshape(-1, 1)
    states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    b, length = len(contexts), ids.shape[1]
    return states.reshape(b, n * length, -1), mask.reshape(b, n * length)


def fid_generate(
    model: Any,
    tokenizer: Any,
    contexts: Sequence[Sequence[str]],
    max_length: int = 20,
    min_length: int = 0,
    num_beams: int = 1,
) -> list[str]:
    """Fusion-in-decoder answers: the decoder generates from the concatenated states of
    :func:`fid_encode`, attending to every context of its question at once."""
    from transformers.modeling_outputs import BaseModelOutput

    states, mask = fid_encode(model, tokenizer, contexts)
    out = model.generate(
        encoder_outputs=BaseModelOutput(last_hidden_state=states),
        attention_mask=mask,
        max_length=max_length,
        min_length=min_length,
        num_beams=num_beams,
        do_sample=False,
    )
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def item_seed(seed: int, image: Image.Image, question: str) -> int:
    """A 63-bit seed from (seed, question, image pixels): the same item gets the same
    captions in any batch, job or shard."""
    h = hashlib.sha256(f"{seed}\x00{question}\x00{image.mode}{image.size}".encode())
    h.update(np.asarray(image).tobytes())
    return int.from_bytes(h.digest()[:8], "little") >> 1


def enc_token_id(tokenizer: Any, vocab_size: int, override: int | None = None) -> int:
    """The id of BLIP's [ENC] token: ``override``, the tokenizer's ``[ENC]``, or the id
    after ``[DEC]`` (the order in which LAVIS added them to bert-base-uncased)."""
    if override is not None:
        chosen = override
    elif "[ENC]" in tokenizer.get_vocab():
        chosen = tokenizer.convert_tokens_to_ids("[ENC]")
    elif tokenizer.bos_token == "[DEC]":
        chosen = tokenizer.bos_token_id + 1
    else:
        raise ValueError("the ITM tokenizer has neither [ENC] nor [DEC]; set pnp.enc_token_id")
    if not 0 <= chosen < vocab_size:
        raise ValueError(f"[ENC] id {chosen} is outside the ITM text vocabulary ({vocab_size})")
    return chosen


class PnpVQA(SharesImageFeatures, GeneratesReplies, VQAModel):
    """PNP-VQA from three checkpoints: ``itm_model``, ``caption_model``, ``qa_model``
    (Hub ids or local folders); ``pnp`` overrides the method's settings (:data:`DEFAULTS`)."""

    def __init__(
        self,
        itm_model: str,
        caption_model: str,
        qa_model: str,
        pnp: dict[str, Any] | None = None,
        seed: int = 0,
        share_image_features: bool = True,
        batch_size: int = SMALL_BATCH_SIZE,
        trust_remote_code: bool = False,
        **loading: Any,
    ) -> None:
        """``loading``: a :class:`~vqarobust.models.loading.Loading`'s fields (name,
        device, dtype, allow_download, use_safetensors)."""
        from transformers import (
            AutoProcessor,
            AutoTokenizer,
            BlipForConditionalGeneration,
            BlipForImageTextRetrieval,
            T5ForConditionalGeneration,
        )

        super().__init__(batch_size)
        placed = Loading(**loading)
        name, device = placed.name, placed.device
        if trust_remote_code:
            raise ValueError(f"model {name!r}: family pnp-vqa runs no remote code")
        unknown = sorted(set(pnp or {}) - set(DEFAULTS))
        if unknown:
            raise ValueError(
                f"model {name!r}: unknown pnp settings {unknown}; known: {sorted(DEFAULTS)}"
            )
        self.name, self.seed = name, seed
        self.settings = {**DEFAULTS, **(pnp or {})}
        self.device = torch.device(device)
        self.dtype = torch_dtype(placed.dtype, self.device)
        paths = {
            k: resolve_weights(f"{name} ({k})", v, placed.allow_download)
            for k, v in (
                ("itm_model", itm_model),
                ("caption_model", caption_model),
                ("qa_model", qa_model),
            )
        }
        for key, local in paths.items():
            check_safetensors(f"{name} ({key})", local, placed.use_safetensors)
        use_safetensors = safetensors_option(placed.use_safetensors)
        weights = {"dtype": self.dtype, "use_safetensors": use_safetensors}
        self.itm_processor = AutoProcessor.from_pretrained(paths["itm_model"])
        self.itm = BlipForImageTextRetrieval.from_pretrained(paths["itm_model"], **weights)
        self.cap_processor = AutoProcessor.from_pretrained(paths["caption_model"])
        self.captioner = BlipForConditionalGeneration.from_pretrained(
            paths["caption_model"], **weights
        )
        self.qa_tokenizer = AutoTokenizer.from_pretrained(paths["qa_model"])
        self.reader = T5ForConditionalGeneration.from_pretrained(paths["qa_model"], **weights)
        for m in (self.itm, self.captioner, self.reader):
            m.to(self.device).eval()
        layers = self.itm.text_encoder.encoder.layer
        block = self.settings["block_num"]
        if not 0 <= block < len(layers) or not hasattr(layers[block], "crossattention"):
            raise ValueError(
                f"model {name!r}: pnp.block_num {block} is not a cross-attention block of the "
                f"ITM text encoder ({len(layers)} blocks)"
            )
        self._cross_attention = layers[block].crossattention.self
        tok = self.itm_processor.tokenizer
        self.enc_token_id = enc_token_id(
            tok, self.itm.config.text_config.vocab_size, self.settings["enc_token_id"]
        )
        self.share_image_features = share_image_features

    @torch.no_grad()
    def _encode(self, images: list[Image.Image]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per image: the ITM vision tokens and the captioner's vision tokens."""
        itm_px = self.itm_processor.image_processor(images, return_tensors="pt")["pixel_values"]
        cap_px = self.cap_processor.image_processor(images, return_tensors="pt")["pixel_values"]
        itm = self.itm.vision_model(pixel_values=itm_px.to(self.device, self.dtype))[0]
        cap = self.captioner.vision_model(pixel_values=cap_px.to(self.device, self.dtype))[0]
        return list(zip(itm, cap, strict=True))

    def relevance(self, itm_embeds: torch.Tensor, questions: Sequence[str]) -> torch.Tensor:
        """GradCAM relevance of each patch to each question (batch, patches)."""
        text = self.itm_processor.tokenizer(
            [q.strip("?") for q in questions],
            padding="longest",
            truncation=True,
            max_length=self.settings["itm_max_length"],
            return_tensors="pt",
        ).to(self.device)
        ids = text["input_ids"].clone()
        ids[:, 0] = self.enc_token_id
        captured: list[torch.Tensor] = []
        hook = self._cross_attention.register_forward_hook(
            lambda _m, _i, out: captured.append(out[1])
        )
        try:
            with torch.enable_grad():
                states = self.itm.text_encoder(
                    input_ids=ids,
                    attention_mask=text["attention_mask"],
                    encoder_hidden_states=itm_embeds,
                    encoder_attention_mask=torch.ones(
                        itm_embeds.shape[:2], dtype=torch.long, device=self.device
                    ),
                ).last_hidden_state
                match = self.itm.itm_head(states[:, 0, :])[:, 1].sum()
                (grads,) = torch.autograd.grad(match, captured[0])
        finally:
            hook.remove()
        return gradcam_relevance(
            captured[0].detach().float(), grads.float(), text["attention_mask"]
        )

    @torch.no_grad()
    def captions(self, cap_embeds: torch.Tensor, relevance: torch.Tensor, seed: int) -> list[str]:
        """Distinct question-guided captions of one image (up to ``num_captions``)."""
        s = self.settings
        gen = torch.Generator().manual_seed(seed)
        tok = self.cap_processor.tokenizer
        prompt = tok([s["caption_prompt"]], return_tensors="pt")["input_ids"]
        prompt[:, 0] = self.captioner.config.text_config.bos_token_id
        prompt = prompt[:, :-1].to(self.device)
        kept: list[str] = []
        for _ in range(s["max_caption_rounds"]):
            picks = sample_patches(relevance, s["num_captions"], s["num_patches"], gen) + 1
            states = cap_embeds[picks.to(self.device)]  # (captions, patches, width)
            # generate samples from the global stream: fork it and seed it per item.
            devices = [self.device] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
                out = self.captioner.text_decoder.generate(
                    input_ids=prompt.repeat(len(picks), 1),
                    encoder_hidden_states=states,
                    encoder_attention_mask=torch.ones(
                        states.shape[:2], dtype=torch.long, device=self.device
                    ),
                    max_length=s["cap_max_length"],
                    min_length=s["cap_min_length"],
                    do_sample=True,
                    top_k=s["top_k"],
                    top_p=s["top_p"],
                    repetition_penalty=s["repetition_penalty"],
                    eos_token_id=tok.sep_token_id,
                    pad_token_id=tok.pad_token_id,
                )
            texts = [t.strip() for t in tok.batch_decode(out, skip_special_tokens=True)]
            prefix = s["caption_prompt"].strip()
            texts = [t[len(prefix) :].strip() if t.startswith(prefix) else t for t in texts]
            kept = keep_new_captions(kept, texts, s["num_captions"])
            if len(kept) >= s["num_captions"]:
                break
        return kept

    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """UnifiedQA's replies for one batch (the three stages, per-item seeded)."""
        s = self.settings
        normalized = [normalize_question(q) for q in questions]
        features = self.image_features(images, self._encode)
        relevance = self.relevance(torch.stack([f[0] for f in features]), normalized)
        contexts, short = [], 0
        for i, (image, question) in enumerate(zip(images, normalized, strict=True)):
            caps = self.captions(
                features[i][1], relevance[i], item_seed(self.seed, image, question)
            )
            short += len(caps) < s["num_captions"]
            contexts.append(qa_contexts(question, caps, s["num_captions_fid"]))
        if short:
            log.warning(
                "model %s: %d of %d questions got fewer than %d distinct captions after %d "
                "rounds; they are answered from those",
                self.name,
                short,
                len(questions),
                s["num_captions"],
                s["max_caption_rounds"],
            )
        with torch.no_grad():
            replies = fid_generate(
                self.reader,
                self.qa_tokenizer,
                contexts,
                s["qa_max_length"],
                s["qa_min_length"],
                s["num_beams"],
            )
        return list(replies)
