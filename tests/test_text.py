"""Text perturbations: every perturbation x severity on real questions, seeding, rates,
the nlpaug tables they follow, and the WordNet-less fallback."""

import hashlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust import perturbations, text
from vqarobust.text import characters, tokens

# easy-VQA's templates, VQAv2-style questions, and the awkward cases: digits,
# punctuation, a single word, no word at all.
QUESTIONS = [
    "what color is the shape?",
    "is there a red circle in the image?",
    "does the image not contain a blue triangle?",
    "What is the man holding in his right hand?",
    "How many people are standing near the large wooden table?",
    "Is the woman on the left wearing a hat or a scarf?",
    "What kind of animal is sleeping on the brown couch?",
    "How many 2x4 bricks, in 1990?",
    "Is it 3:45 p.m. yet -- or not?!",
    "Why?",
    "Red?",
    "?",
]
ALL = text.names()


def test_the_twelve_perturbations_are_registered_in_the_one_registry():
    expected = [
        "keyboard",
        "ocr",
        "char_insert",
        "char_replace",
        "char_swap",
        "char_delete",
        "synonym_replace",
        "word_insert",
        "word_swap",
        "word_swap_random",
        "word_delete",
        "punct_insert",
    ]
    assert sorted(expected) == ALL
    assert text.names(level="char") == sorted(
        ["keyboard", "ocr", "char_insert", "char_replace", "char_swap", "char_delete"]
    )
    for name in ALL:
        assert perturbations.modality(name) == "text"
    assert perturbations.modality("snow") == "image"
    assert perturbations.modality("bq_lasso") == "basic_question"
    assert perturbations.severities("bq_lasso") == list(range(1, 8))
    with pytest.raises(KeyError, match="known:"):
        perturbations.entry("keybord")


@pytest.mark.parametrize("name", ALL)
def test_every_perturbation_and_severity_is_deterministic_and_never_empty(name, wordnet):
    for i, q in enumerate(QUESTIONS):
        for severity in text.SEVERITIES:
            out = text.perturb_item(q, name, severity, 0, i)
            assert isinstance(out, str) and out.strip(), (name, severity, q)
            assert out == text.perturb_item(q, name, severity, 0, i)
    # A question with no word can only come back unchanged.
    assert text.perturb("?", name, 5, seed=1) == "?"
    assert text.perturb("Why?", name, 0) == "Why?"


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@pytest.mark.parametrize("name", ALL)
def test_edit_rate_grows_with_severity(name, wordnet):
    long_questions = [q for q in QUESTIONS if len(q.split()) >= 6]
    rates = []
    for severity in text.SEVERITIES:
        dist = [
            _edit_distance(q, text.perturb_item(q, name, severity, seed, i)) / len(q)
            for seed in range(8)
            for i, q in enumerate(long_questions)
        ]
        rates.append(float(np.mean(dist)))
    assert rates[0] > 0
    assert all(b > a for a, b in zip(rates, rates[1:], strict=False)), rates


def test_touched_words_follow_the_documented_shares():
    # 10 words: 1, 2, 3, 4, 5 touched; at least one, never more than are eligible.
    assert [tokens.n_touched(10, s, 10) for s in range(1, 6)] == [1, 2, 3, 4, 5]
    assert [tokens.n_touched(4, s, 4) for s in range(1, 6)] == [1, 1, 1, 2, 2]
    assert tokens.n_touched(10, 5, 2) == 2
    with pytest.raises(ValueError, match="1..5"):
        tokens.n_touched(10, 6, 10)


def test_the_multimodal_papers_rates():
    """text.word_share, text.char_share, text.char_min_length: the paper's p = 0.05 per
    level, ~30% of a touched word's characters (nlpaug's count), words of 4+ letters."""
    from nlpaug.augmenter.char import RandomCharAug

    paper = tokens.Rates((0.05, 0.1, 0.15, 0.2, 0.25), 0.3, 4)
    assert [tokens.n_touched(20, s, 20, paper) for s in range(1, 6)] == [1, 2, 3, 4, 5]
    # Characters per touched word: nlpaug's own count, at 0.3 with its min 1 and max 10.
    theirs = RandomCharAug(action="substitute", aug_char_p=0.3)
    for n in range(4, 45):
        assert paper.chars(n, n) == theirs._generate_aug_cnt(n, 1, 10, 0.3), n
    assert paper.chars(10, 2) == 2 and tokens.RATES.chars(10, 7) == 1
    q = "an ox is by the enormous elephant beside two tall giraffes"  # 11 words, 6 short
    for seed in range(30):
        out = text.perturb(q, "char_replace", 5, seed, paper)
        before, after = q.split(), out.split()
        assert len(before) == len(after)
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 3  # 0.25 x 11 words, rounded
        for a, b in changed:  # replaced letters: distinct positions, each a new letter
            assert len(a) >= 4 and sum(x != y for x, y in zip(a, b, strict=True)) == (
                paper.chars(len(a), len(a))
            )
    # Insertions and deletions at several positions of one word, from the last.
    out = text.perturb("elephants", "char_delete", 1, 3, paper)
    assert len(out) == len("elephants") - paper.chars(9, 9)
    assert text.perturb("elephants", "char_insert", 1, 3, paper) != "elephants"
    # The word level follows word_share alone.
    assert text.perturb(q, "word_delete", 1, 0, paper).count(" ") == q.count(" ") - 1
    with pytest.raises(ValueError, match="1..5"):
        tokens.n_touched(10, 6, 10, paper)
    # Every letter of every word at most: a deletion still leaves each word a letter.
    everything = tokens.Rates((0.2, 0.4, 0.6, 0.8, 1.0), 1.0, 1)
    for seed in range(10):
        out = text.perturb(q, "char_delete", 5, seed, everything)
        assert len(out.split()) == len(q.split()) and out != q


def test_the_configs_default_rates_are_the_librarys():
    from vqarobust.config import validate_config

    config = validate_config(
        {
            "dataset": {"name": "d", "adapter": "easy-vqa"},
            "corruptions": ["snow"],
            "models": {"m": {"family": "blip", "path_or_id": "x"}},
        }
    )
    assert tokens.Rates.from_params(config["text"]) == tokens.RATES


def test_seed_depends_on_question_id_not_order():
    q = QUESTIONS[4]
    a = [text.perturb_item(q, "char_swap", 3, 0, qid) for qid in (7, 8, 9)]
    b = [text.perturb_item(q, "char_swap", 3, 0, qid) for qid in (9, 8, 7)][::-1]
    assert a == b
    assert len(set(a)) == 3  # each question id draws its own swaps


def test_outputs_are_pinned():
    # Golden values: a change here changes every text subset (its code digest reruns them).
    q = "How many people are standing near the large wooden table?"
    outputs = "\n".join(
        text.perturb_item(q, n, s, 0, 42)
        for n in text.names()
        if text.needs(n) is None and n != "word_swap_random"  # pinned below, added later
        for s in text.SEVERITIES
    )
    assert text.perturb_item(q, "word_swap", 1, 0, 42) == (
        "How many people standing are near the large wooden table?"
    )
    digest = hashlib.sha256(outputs.encode()).hexdigest()[:16]
    assert digest == GOLDEN, outputs


GOLDEN = "df270fc9e4a66523"
GOLDEN_RANDOM_SWAP = "3d5314ee2412040b"


def _substitutions(name: str, n: int = 40) -> list[tuple[str, str]]:
    pairs = []
    for i in range(n):
        q = QUESTIONS[i % 8]
        out = text.perturb_item(q, name, 1, 0, i)
        assert len(out) == len(q)
        pairs += [(a, b) for a, b in zip(q, out, strict=True) if a != b]
    return pairs


def test_keyboard_typos_are_neighbouring_keys_of_nlpaug():
    import nlpaug
    from nlpaug.model.char import Keyboard

    path = f"{nlpaug.__path__[0]}/res/char/keyboard/en.json"
    theirs = Keyboard(special_char=True, numeric=True, upper_case=True, model_path=path).model
    pairs = _substitutions("keyboard")
    assert len(pairs) >= 30
    for a, b in pairs:
        assert b in theirs[a], (a, b)
        assert a.isupper() == b.isupper() or not a.isalpha()
    # The table itself, read without importing nlpaug, is what nlpaug's model makes of it.
    ours = Keyboard(special_char=False, numeric=True, upper_case=False, model_path=path).model
    assert characters.keyboard_neighbours() == ours


def test_the_character_tables_are_read_without_importing_torch():
    """A job of keyboard or OCR typos needs nlpaug's two JSON tables, not its package,
    which imports torch and pandas: a fresh process makes both perturbations without them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vqarobust import text\n"
        "q = 'What color is the small circle near the 0 and 1?'\n"
        "for name in ('keyboard', 'ocr'):\n"
        "    assert text.perturb_item(q, name, 5, 0, 7) != q, name\n"
        "print(sorted(m for m in ('torch', 'pandas', 'nlpaug') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["[]"]


def test_ocr_confusions_are_nlpaugs():
    import json

    import nlpaug
    from nlpaug.model.char import Ocr

    path = f"{nlpaug.__path__[0]}/res/char/ocr/en.json"
    theirs = Ocr(json.load(open(path))).model  # noqa: SIM115
    pairs = _substitutions("ocr")
    assert pairs
    for a, b in pairs:
        assert b in theirs[a], (a, b)
    assert characters.ocr_confusions() == theirs


def test_eda_random_swap_swaps_words_at_any_distance():
    """word_swap_random is EDA's random swap: two random positions per touched word;
    word_swap only neighbours. Golden for severity 1..5 of one question and seed."""
    q = "How many people are standing near the large wooden table?"
    outputs = [text.perturb_item(q, "word_swap_random", s, 0, 42) for s in text.SEVERITIES]
    assert hashlib.sha256("\n".join(outputs).encode()).hexdigest()[:16] == GOLDEN_RANDOM_SWAP
    words = q.rstrip("?").split()
    far = 0
    for seed in range(40):
        got = text.perturb_item(q, "word_swap_random", 1, 0, seed).rstrip("?").split()
        moved = [i for i, (a, b) in enumerate(zip(words, got, strict=True)) if a != b]
        assert sorted(got) == sorted(words) and len(moved) in (0, 2)  # one swap at severity 1
        far += len(moved) == 2 and moved[1] - moved[0] > 1
        near = text.perturb_item(q, "word_swap", 1, 0, seed).rstrip("?").split()
        moved = [i for i, (a, b) in enumerate(zip(words, near, strict=True)) if a != b]
        assert moved[1] - moved[0] == 1
    assert far > 20  # most random pairs of 10 words are not neighbours
    assert text.perturb("Why?", "word_swap_random", 5, seed=3) == "Why?"


def test_word_level_edits_keep_punctuation_and_words():
    q = "What is the man holding in his right hand?"
    for s in text.SEVERITIES:
        for name in ("word_swap", "word_swap_random"):
            swapped = text.perturb_item(q, name, s, 0, 1)
            assert sorted(swapped.rstrip("?").split()) == sorted(q.rstrip("?").split())
            assert swapped.endswith("?")
        deleted = text.perturb_item(q, "word_delete", s, 0, 1)
        assert deleted.endswith("?") and set(deleted.rstrip("?").split()) < set(q[:-1].split())
        marks = text.perturb_item(q, "punct_insert", s, 0, 1)
        assert re.sub(r"(^| )[.;?:!,](?= )", "", marks).strip() == q
    assert text.perturb("Why?", "word_delete", 5, seed=3) == "Why?"


def test_synonyms_come_from_wordnet_and_skip_function_words(wordnet):
    from vqarobust.text import wordnet as wn

    assert "large" in wn.synonyms("big")
    assert "brick" not in wn.synonyms("bricks")  # a base form is no synonym
    q = "What is the color of the big shape?"
    for seed in range(20):
        out = text.perturb(q, "synonym_replace", 1, seed)
        kept = [w for w in ("What", "is", "the", "of") if w in out.split()]
        assert kept == ["What", "is", "the", "of"]


def test_without_wordnet_the_synonym_perturbations_are_named_and_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("WNSEARCHDIR", str(tmp_path))
    assert set(text.names()) - set(text.names(available=True)) == {
        "synonym_replace",
        "word_insert",
    }
    with pytest.raises(text.WordNetMissing, match="wordnet-base"):
        text.perturb("what color is the shape?", "synonym_replace", 1)
    assert text.perturb("what color is the shape?", "char_swap", 1, seed=0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="0..5"):
        text.perturb("why?", "char_swap", 6)
    with pytest.raises(TypeError, match="str"):
        text.perturb(None, "char_swap", 1)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="known:"):
        text.perturb("why?", "typo", 1)


@settings(max_examples=60, deadline=None)
@given(
    st.text(min_size=1, max_size=60),
    st.sampled_from([n for n in ALL if text.needs(n) is None]),
    st.integers(1, 5),
    st.integers(0, 2**32),
)
def test_any_string_survives(question, name, severity, seed):
    out = text.perturb(question, name, severity, seed)
    assert isinstance(out, str)
    if question.strip():
        assert out.strip()
