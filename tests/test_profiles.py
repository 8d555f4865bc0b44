"""The SLURM profile as a user runs it: the shipped profiles/slurm, unedited, and after it
a profile of their own (profiles/slurm-site.example) with the account and the partitions,
read by Snakemake's own argument parser. tests/cluster/test_slurm.py submits through the
pair to a real SLURM."""

from __future__ import annotations

import yaml

from tests.conftest import REPO

SHIPPED = REPO / "profiles" / "slurm"
SITE = REPO / "profiles" / "slurm-site.example"


def test_a_site_profile_after_the_shipped_one_adds_account_and_partitions(tmp_path, monkeypatch):
    from snakemake.cli import parse_args

    monkeypatch.chdir(tmp_path)  # no profiles/default here: only the two profiles count
    _, args = parse_args(["-n", "--profile", str(SHIPPED), "--profile", str(SITE)])
    # The shipped profile's keys that the site profile leaves alone are kept...
    assert args.executor == "slurm" and args.config == ["inference_jobs=subset"]
    assert set(args.set_resources) == {"train_model", "corrupt_images"}
    # ... the partitions file is the one beside the site profile (a relative path is
    # resolved against its folder) ...
    assert args.slurm_partition_config == SITE / "partitions.yaml"
    # ... and default-resources, which the site profile replaces whole, still holds the
    # shipped entries (the example repeats them) beside the account.
    resources = args.default_resources
    shipped = yaml.safe_load((SHIPPED / "config.yaml").read_text())["default-resources"]
    assert {k: resources[k].value for k in shipped} == shipped == {"runtime": 60, "mem_mb": 4000}
    assert resources["slurm_account"].raw == "my-account"


def test_the_shipped_profiles_hold_no_placeholder():
    """Nothing in profiles/slurm waits to be edited: no account, no partition names."""
    assert sorted(p.name for p in SHIPPED.iterdir()) == ["config.yaml"]
    profile = yaml.safe_load((SHIPPED / "config.yaml").read_text())
    assert "slurm_account" not in profile["default-resources"]
    assert "slurm-partition-config" not in profile
