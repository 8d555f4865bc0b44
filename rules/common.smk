# The study plan (vqarobust.plan): built once from the validated config, it is the one
# name the rule files share; every input function and param is a call into it.
import os
import sys

from snakemake.io import local
from snakemake.settings.types import SharedFSUsage

from vqarobust import plugins, storage_paths
from vqarobust.cloud_files import node_user_path
from vqarobust.config import ConfigError, validate_config
from vqarobust.plan import StudyPlan
from vqarobust.plan.models import cores_per_gpu

# A shipped study (config/paper.yaml, config/scenes.yaml) merged into the default would
# silently run the default's question study too: refuse it, saying how to run it.
_cli_config = workflow.config_settings.overwrite_config or {}
if _cli_config.get("study") and not workflow.config_settings.replace_workflow_config:
    sys.exit(
        f"config error at study: {config['study']!r} is a study of its own; run it with "
        "--replace-workflow-config (without it, --configfile merges the study into "
        "config/config.yaml and the default's text and basic-question study would run too)"
    )
# Validate and plan before any job runs: a wrong key or value, or a study that cannot be
# planned, fails here naming the key. The message is all a person needs; a traceback
# would only bury it. Plugins (docs/extending.md) load inside validation, first; the jobs
# load the same modules (vqarobust.jobs).
try:
    validate_config(config)
    # The scripts beside these rules (a module's own): their imports are the code each
    # job's code param digests. A file the config names is relative to the working
    # directory, never under a module's prefix (docs/workflow.md, "Using vqarobust as a
    # module").
    scripts = os.path.join(str(workflow.current_basedir), "..", "workflow", "scripts")
    # Jobs that share no filesystem with this machine (a cloud executor) find only the
    # deployed sources: a file the config names must be one (vqarobust.cloud_files).
    # Checked where the run starts (a job's own Snakemake has the sources, not git), when
    # the DAG is built: Snakemake settles the executor's filesystem after reading this.
    user_path = local
    if workflow.is_main_process and config["storage"]["named_files"] == "sources":
        user_path = node_user_path(
            local,
            lambda: SharedFSUsage.INPUT_OUTPUT in workflow.storage_settings.shared_fs_usage,
        )
    PLAN = StudyPlan.build(config, user_path=user_path, scripts_dir=os.path.normpath(scripts))
except ConfigError as exc:
    sys.exit(str(exc))
os.environ[plugins.ENV] = ",".join(config["plugins"])
# A local run shares its --cores among its jobs: each GPU job's threads are capped at
# cores / gpus (--resources gpu=N), so that the cores never bind before the GPUs. A
# cluster run (--jobs, workflow.nodes set) gives every job cores of its own: no cap.
if workflow.nodes is None:
    PLAN.models.cores_per_gpu = cores_per_gpu(
        workflow.resource_settings.cores, workflow.global_resources.get("gpu").value
    )
# On object storage (docs/cloud.md) jobs load local copies of their inputs; what they
# record names the workflow's own paths (vqarobust.storage_paths). Every job's Snakemake
# parses this file with the same storage settings, also on a cloud executor.
_storage = workflow.storage_settings
if _storage.default_storage_provider and _storage.default_storage_prefix:
    os.environ[storage_paths.ENV] = storage_paths.local_copies(
        _storage.local_storage_prefix,
        _storage.default_storage_provider,
        _storage.default_storage_prefix,
    )
# Said in dry runs too: what a run would leave out is worth knowing before it starts.
if workflow.is_main_process:
    for line in PLAN.skipped_messages():
        print(line)


wildcard_constraints:
    **PLAN.wildcard_constraints(),
