"""Word-level tokenizers built from a question corpus, saved in Hugging Face format."""

from __future__ import annotations

import re
from collections.abc import Iterable

from transformers import BertTokenizerFast

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# BERT's pre-tokenizer splits on whitespace and punctuation; mirror it so every
# pre-token of the corpus is a whole entry of the vocabulary.
_PRETOKEN = re.compile(r"\w+|[^\w\s]")


def build_tokenizer(texts: Iterable[str], min_count: int = 1) -> BertTokenizerFast:
    """A lower-casing BERT tokenizer whose vocabulary is the corpus' words.

    Words seen fewer than ``min_count`` times map to [UNK]; order is deterministic
    (by count, then alphabetically), so the same corpus gives the same ids.
    """
    counts: dict[str, int] = {}
    for text in texts:
        for token in _PRETOKEN.findall(text.lower()):
            counts[token] = counts.get(token, 0) + 1
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *words])}
    return BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=40)
