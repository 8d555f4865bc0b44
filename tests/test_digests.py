import hashlib

import pytest

from vqarobust.digests import file_sha256, listing_sha256, text_sha256, tree_sha256
from vqarobust.models.identity import resolve_checkpoints
from vqarobust.models.loading import MissingWeightsError


def test_file_digest_is_sha256_of_its_bytes(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    # Pinned: the SHA-256 test vector of "abc".
    assert file_sha256(tmp_path / "a") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert text_sha256("abc") == file_sha256(tmp_path / "a")


def test_folder_digest_covers_names_and_bytes_in_sorted_order(tmp_path):
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "b").write_bytes(b"2")
    (d / "sub" / "a").write_bytes(b"1")
    lines = f"b\0{hashlib.sha256(b'2').hexdigest()}\nsub/a\0{hashlib.sha256(b'1').hexdigest()}\n"
    assert tree_sha256(d) == hashlib.sha256(lines.encode()).hexdigest()
    before = tree_sha256(d)
    (d / ".b.tmp-123").write_bytes(b"half-written")  # an atomic write in flight
    assert tree_sha256(d) == before
    (d / "b").write_bytes(b"3")  # same size, other bytes
    assert tree_sha256(d) != before
    listing = listing_sha256(d)
    (d / "b").write_bytes(b"4")
    assert listing_sha256(d) == listing  # names and sizes only
    (d / "sub" / "a").rename(d / "sub" / "c")
    assert listing_sha256(d) != listing


def test_a_missing_input_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file or folder"):
        tree_sha256(tmp_path / "nope")


def test_checkpoint_identity(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    entry = {"family": "vqa-classifier", "path_or_id": str(tmp_path / "m")}
    local = resolve_checkpoints(entry)
    assert local.identity == {
        "path_or_id": {"path": str(tmp_path / "m"), "sha256": tree_sha256(tmp_path / "m")}
    }
    assert local.entry == entry
    # Weights that resolve to nothing are an error naming the model, not a None commit
    # that a later download would contradict.
    with pytest.raises(MissingWeightsError, match="'m'.*nobody/not-cached-anywhere"):
        resolve_checkpoints({"family": "blip", "path_or_id": "nobody/not-cached-anywhere"}, "m")
    served = resolve_checkpoints({"family": "openai-chat", "model": "llava"}).identity
    assert served == {"model": {"served": "llava", "weights": "unknown (served)"}}


def test_a_cached_hub_id_is_identified_by_its_commit(tmp_path, monkeypatch):
    """A hub cache laid out as huggingface_hub writes it resolves to its snapshot commit."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    resolved = resolve_checkpoints({"family": "blip", "path_or_id": "org/tiny", "revision": "main"})
    assert resolved.identity["path_or_id"]["commit"] == commit
    # The adapter is handed the snapshot that was identified, the revision spent.
    assert resolved.entry == {"family": "blip", "path_or_id": str(repo / "snapshots" / commit)}
