"""Which files a config names reach the jobs of an executor without a shared filesystem
(vqarobust.cloud_files): the working directory's git-tracked files up to 10 MB, as
Snakemake deploys its sources; the workflow's refusal is tested by a Kubernetes dry run
(tests/cluster/test_cloud_profiles.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from vqarobust.cloud_files import SOURCE_FILE_LIMIT, node_user_path, not_deployed, tracked_files
from vqarobust.config import ConfigError


@pytest.fixture()
def checkout(tmp_path):
    """A git working directory: data/small.json and data/big.bin (one byte over the
    limit, sparse) and weights/a.bin tracked; weights/b.bin and notes.txt not."""
    (tmp_path / "data").mkdir()
    (tmp_path / "weights").mkdir()
    (tmp_path / "data" / "small.json").write_text("{}")
    with open(tmp_path / "data" / "big.bin", "wb") as f:
        f.truncate(SOURCE_FILE_LIMIT + 1)
    (tmp_path / "weights" / "a.bin").write_bytes(b"a")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "data", "weights/a.bin"], check=True)
    (tmp_path / "weights" / "b.bin").write_bytes(b"b")
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path


def test_tracked_files_are_gits_relative_paths(checkout, tmp_path_factory):
    assert tracked_files(checkout) == {
        os.path.join("data", "small.json"),
        os.path.join("data", "big.bin"),
        os.path.join("weights", "a.bin"),
    }
    assert tracked_files(tmp_path_factory.mktemp("no-repo")) == frozenset()


def test_only_small_tracked_files_of_the_working_directory_travel(checkout):
    tracked = tracked_files(checkout)
    assert not_deployed("data/small.json", tracked, checkout) is None
    assert not_deployed("./data/../data/small.json", tracked, checkout) is None
    assert not_deployed("notes.txt", tracked, checkout) == "git does not track notes.txt"
    assert not_deployed("data/big.bin", tracked, checkout) == (
        f"{os.path.join('data', 'big.bin')} is over 10 MB"
    )
    # A folder travels when every file of it does.
    assert not_deployed("weights", tracked, checkout) == (
        f"git does not track {os.path.join('weights', 'b.bin')}"
    )
    assert not_deployed("data/small.json", set(), checkout) is not None
    (checkout / "weights" / "c.bin").write_bytes(b"c")
    assert not_deployed("weights/", tracked, checkout) == (
        f"git does not track {os.path.join('weights', 'b.bin')} and 1 more file"
    )
    outside = "it lies outside the working directory"
    assert not_deployed(str(checkout / "data" / "small.json"), tracked, checkout) == outside
    assert not_deployed("../elsewhere.json", tracked, checkout) == outside
    # Not here at all: the job's own input check names it.
    assert not_deployed("data/absent.json", tracked, checkout) is None


def test_the_user_path_marks_what_travels_and_refuses_the_rest(checkout):
    shares = [False]
    user_path = node_user_path(lambda p: ("local", p), lambda: shares[0], checkout)
    assert user_path("data/small.json") == ("local", "data/small.json")
    shares[0] = True  # a shared filesystem: nothing is checked
    assert user_path("weights") == ("local", "weights")
    shares[0] = False
    with pytest.raises(ConfigError) as err:
        user_path("weights")
    message = str(err.value)
    assert message.startswith("config error: the config names weights, which no job")
    assert "git does not track" in message and "storage.named_files: on_nodes" in message
