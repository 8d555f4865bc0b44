"""lmms-eval task YAMLs over an exported dataset (:mod:`vqarobust.hf_export`).

One task per configuration, ``vqarobust_<perturbation>_<severity>`` (a non-word
character of the perturbation becomes ``_``), each including one template that names the
dataset (``dataset_path``: the export's folder or its Hub id; ``dataset_name``: the
configuration), lmms-eval's VQAv2 prompt and scoring (:mod:`vqarobust.lmms_task_utils`,
copied as ``utils.py``). Groups: ``vqarobust`` holds the clean task and one subgroup per
modality that has tasks, ``vqarobust_image``, ``vqarobust_text`` (question perturbations
and basic questions) and ``vqarobust_context``. No group aggregates: a mean over clean
and perturbed subsets is no robustness measure; vqarobust's analyses are (docs/interop.md).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from vqarobust import lmms_task_utils

GROUP = "vqarobust"
TEMPLATE = "_default_template_vqarobust_yaml"
SUBGROUPS = {
    "image": "vqarobust_image",
    "text": "vqarobust_text",
    "basic_question": "vqarobust_text",
    "context": "vqarobust_context",
}
# What every task shares; the dataset's path is filled in.
_TEMPLATE = """\
# Written by `vqarobust hf-export`: what every vqarobust task shares.
dataset_path: {dataset_path}
test_split: test
output_type: generate_until
doc_to_visual: !function utils.vqarobust_doc_to_visual
doc_to_text: !function utils.vqarobust_doc_to_text
doc_to_target: answers
generation_kwargs:
  max_new_tokens: 16
process_results: !function utils.vqarobust_process_results
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
  - metric: vqarobust_sample
    aggregation: !function utils.vqarobust_count
    higher_is_better: true
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: {post_prompt}
metadata:
  version: 0.0
"""


def task_name(perturbation: str, severity: int) -> str:
    """The lmms-eval task of one configuration: ``vqarobust_snow_3``."""
    return f"{GROUP}_{re.sub(r'[^0-9A-Za-z_]', '_', perturbation)}_{int(severity)}"


def task_files(configs: Sequence[tuple[str, str, int, str]], dataset_path: str) -> dict[str, str]:
    """File name -> text of every task and group YAML for ``configs`` (configuration,
    perturbation, severity, modality), the template naming ``dataset_path``."""
    files = {
        TEMPLATE: _TEMPLATE.format(
            dataset_path=json.dumps(dataset_path),
            post_prompt=json.dumps(lmms_task_utils.POST_PROMPT),
        )
    }
    members: dict[str, list[str]] = {}
    top: list[str] = []
    for config, perturbation, severity, modality in configs:
        task = task_name(perturbation, severity)
        if f"{task}.yaml" in files:
            # Two names that differ only in non-word characters: lmms-eval would see one.
            raise ValueError(f"configurations {config!r} and another both make task {task!r}")
        files[f"{task}.yaml"] = (
            f"task: {task}\ninclude: {TEMPLATE}\ndataset_name: {json.dumps(config)}\n"
        )
        if modality in SUBGROUPS:
            members.setdefault(SUBGROUPS[modality], []).append(task)
        else:  # the clean subset
            top.append(task)
    for group, tasks in members.items():
        files[f"_{group}.yaml"] = _group(group, tasks)
    files[f"_{GROUP}.yaml"] = _group(GROUP, [*top, *members])
    return files


def _group(name: str, tasks: Sequence[str]) -> str:
    return f"group: {name}\ntask:\n" + "".join(f"  - {t}\n" for t in tasks)


def write_tasks(
    folder: str | Path, configs: Sequence[tuple[str, str, int, str]], dataset_path: str
) -> list[Path]:
    """Write :func:`task_files` and ``utils.py`` into ``folder`` (created); returns the
    paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in task_files(configs, dataset_path).items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    utils = folder / "utils.py"
    shutil.copyfile(lmms_task_utils.__file__, utils)
    return [*written, utils]
