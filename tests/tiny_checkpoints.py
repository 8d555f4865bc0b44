"""Build tiny random-initialised Hugging Face checkpoints offline, for adapter tests."""

from __future__ import annotations

from pathlib import Path

from vqarobust.models.vocab import build_tokenizer

WORDS = ["what", "color", "is", "the", "shape", "there", "a", "circle", "red", "blue", "yes",
         "no", "does", "image", "contain", "triangle", "?", "2", "dog", "how", "many"]  # fmt: skip


def tiny_blip(path: Path) -> Path:
    """A BlipForQuestionAnswering with 1-layer encoders and a BERT word tokenizer."""
    from transformers import BlipConfig, BlipForQuestionAnswering, BlipProcessor
    from transformers.models.blip import BlipImageProcessor

    tok = build_tokenizer([" ".join(WORDS)])
    tok.add_special_tokens({"bos_token": "[DEC]"})
    vocab = len(tok)
    text = {"vocab_size": vocab, "hidden_size": 32, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 64, "encoder_hidden_size": 32,
            "bos_token_id": tok.convert_tokens_to_ids("[DEC]"), "pad_token_id": tok.pad_token_id,
            "sep_token_id": tok.sep_token_id, "eos_token_id": tok.sep_token_id,
            "max_position_embeddings": 64}  # fmt: skip
    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 64, "image_size": 32, "patch_size": 8}  # fmt: skip
    model = BlipForQuestionAnswering(BlipConfig(text_config=text, vision_config=vision))
    processor = BlipProcessor(
        image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
