"""The workflow path of a job's local copy of a file on object storage."""

from __future__ import annotations

from vqarobust.inference import workflow_identity
from vqarobust.storage_paths import ENV, local_copies, workflow_path

COPIES = ".snakemake/storage/s3/bucket/runs/a"


def test_the_local_copies_folder_drops_the_scheme_and_a_trailing_slash():
    assert local_copies(".snakemake/storage", "s3", "s3://bucket/runs/a/") == COPIES
    assert local_copies("/scratch/st", "gcs", "gs://b/p") == "/scratch/st/gcs/b/p"


def test_a_local_copy_is_named_by_its_workflow_path_and_other_paths_are_kept():
    model = f"{COPIES}/resources/models/easy-vqa/vilt-tiny"
    assert workflow_path(model, COPIES) == "resources/models/easy-vqa/vilt-tiny"
    # Another prefix of the same bucket, a local folder, a path that only starts alike.
    for path in (
        ".snakemake/storage/s3/bucket/runs/b/resources/x",
        "resources/models/easy-vqa/vilt-tiny",
        f"{COPIES}-old/resources/x",
    ):
        assert workflow_path(path, COPIES) == path


def test_without_the_variable_a_local_run_keeps_its_paths(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    path = f"{COPIES}/resources/models/m"
    assert workflow_path(path) == path
    monkeypatch.setenv(ENV, COPIES)
    assert workflow_path(path) == "resources/models/m"


def test_checkpoint_identities_name_the_workflow_path_and_keep_hub_ids(monkeypatch):
    monkeypatch.setenv(ENV, COPIES)
    identity = {
        "path_or_id": {"path": f"{COPIES}/resources/models/m", "sha256": "ab"},
        "vision": {"hub_id": "org/x", "revision": None, "commit": "c0"},
    }
    assert workflow_identity(identity) == {
        "path_or_id": {"path": "resources/models/m", "sha256": "ab"},
        "vision": {"hub_id": "org/x", "revision": None, "commit": "c0"},
    }
