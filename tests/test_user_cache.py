"""Where the package keeps its content-keyed caches (vqarobust.user_cache)."""

from __future__ import annotations

from pathlib import Path

from vqarobust.user_cache import cache_root


def test_the_cache_folder_follows_the_variables_and_is_absolute(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VQAROBUST_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "vqarobust"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "vqarobust"
    # A relative XDG_CACHE_HOME is ignored, as the XDG specification says.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    assert cache_root() == tmp_path / "home" / ".cache" / "vqarobust"
    # VQAROBUST_CACHE wins, made absolute against the working directory it was read in.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VQAROBUST_CACHE", "mine")
    assert cache_root() == tmp_path / "mine"
    assert Path("mine").absolute() == cache_root()
