"""WordNet 3.0 for the synonym-based perturbations, read offline with nltk.

Debian's ``wordnet-base`` package ships the WordNet 3.0 database in /usr/share/wordnet
(``WNSEARCHDIR`` points elsewhere). nltk's reader also wants ``lexnames``, the fixed list
of the 45 lexicographer files, which that package leaves out; it is written next to
links to the database files in a private folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE = "wordnet-base"
DEFAULT_DIR = "/usr/share/wordnet"
FILES = (
    "adj.exc",
    "adv.exc",
    "noun.exc",
    "verb.exc",
    "cntlist.rev",
    "data.adj",
    "data.adv",
    "data.noun",
    "data.verb",
    "index.adj",
    "index.adv",
    "index.noun",
    "index.verb",
)

# WordNet 3.0's lexicographer files (wninput(5WN), "lexnames"): number, name, category
# (1 noun, 2 verb, 3 adjective, 4 adverb), in file order.
LEXNAMES = (
    ("adj.all", 3),
    ("adj.pert", 3),
    ("adv.all", 4),
    ("noun.Tops", 1),
    ("noun.act", 1),
    ("noun.animal", 1),
    ("noun.artifact", 1),
    ("noun.attribute", 1),
    ("noun.body", 1),
    ("noun.cognition", 1),
    ("noun.communication", 1),
    ("noun.event", 1),
    ("noun.feeling", 1),
    ("noun.food", 1),
    ("noun.group", 1),
    ("noun.location", 1),
    ("noun.motive", 1),
    ("noun.object", 1),
    ("noun.person", 1),
    ("noun.phenomenon", 1),
    ("noun.plant", 1),
    ("noun.possession", 1),
    ("noun.process", 1),
    ("noun.quantity", 1),
    ("noun.relation", 1),
    ("noun.shape", 1),
    ("noun.state", 1),
    ("noun.substance", 1),
    ("noun.time", 1),
    ("verb.body", 2),
    ("verb.change", 2),
    ("verb.cognition", 2),
    ("verb.communication", 2),
    ("verb.competition", 2),
    ("verb.consumption", 2),
    ("verb.contact", 2),
    ("verb.creation", 2),
    ("verb.emotion", 2),
    ("verb.motion", 2),
    ("verb.perception", 2),
    ("verb.possession", 2),
    ("verb.social", 2),
    ("verb.stative", 2),
    ("verb.weather", 2),
    ("adj.ppl", 3),
)


class WordNetMissing(RuntimeError):
    """WordNet 3.0 is not installed where it is looked for."""


def wordnet_dir() -> Path | None:
    """The folder holding the WordNet 3.0 database, or None when it is absent."""
    folder = Path(os.environ.get("WNSEARCHDIR") or DEFAULT_DIR)
    return folder if all((folder / f).is_file() for f in FILES) else None


def missing_message() -> str:
    """Why the synonym-based perturbations cannot run, and how to fix it."""
    where = os.environ.get("WNSEARCHDIR") or DEFAULT_DIR
    return (
        f"WordNet 3.0 not found in {where}: install the Debian package {PACKAGE} "
        f"(apt-get install {PACKAGE}) or point WNSEARCHDIR at a WordNet 3.0 dict folder"
    )


@cache
def load() -> Any:
    """nltk's WordNet reader over the installed database (loaded once per process)."""
    folder = wordnet_dir()
    if folder is None:
        raise WordNetMissing(missing_message())
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _English(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            # Maps synsets to nltk's downloaded WordNet for multilingual data; the
            # database here is WordNet 3.0 itself and only English is used.
            return None

    # nltk reads only inside the reader's root and its data path (its path sandbox), and
    # refuses links of any kind, so the files (28 MB) are copied into a private folder
    # that lives as long as the reader.
    tmp = tempfile.TemporaryDirectory(prefix="vqarobust-wordnet-")
    root = Path(tmp.name)
    for name in FILES:
        shutil.copyfile(folder / name, root / name)
    lines = [f"{i:02d}\t{name}\t{cat}" for i, (name, cat) in enumerate(LEXNAMES)]
    (root / "lexnames").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    with warnings.catch_warnings():
        # WordNet 3.0 without the Open Multilingual Wordnet: English is all we use.
        warnings.filterwarnings("ignore", "The multilingual functions", UserWarning)
        reader = _English(str(root), None)
    reader._vqarobust_folder = tmp  # removed with the reader
    return reader


@cache
def synonyms(word: str) -> tuple[str, ...]:
    """WordNet synonyms of ``word`` (lemmas of all its synsets, any part of speech), in
    WordNet's order, without the word itself; multi-word lemmas joined by spaces."""
    wn = load()
    lower = word.lower()
    # The word's own base forms ("bricks" -> "brick") are no synonyms.
    same = {lower} | {base for pos in "nvar" if (base := wn.morphy(lower, pos))}
    found = dict.fromkeys(
        lemma.name().replace("_", " ") for synset in wn.synsets(lower) for lemma in synset.lemmas()
    )
    return tuple(s for s in found if s.lower() not in same and s.replace(" ", "").isalpha())
