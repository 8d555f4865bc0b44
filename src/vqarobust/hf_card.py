"""The dataset card (``README.md``) of an exported run (:mod:`vqarobust.hf_export`).

Its YAML front matter is the Hub's: ``configs`` (each configuration's Parquet files),
``dataset_info`` (features and row counts per configuration), the licence of the source
dataset. Its body lists the configurations, each perturbation with what it does, its
parameters at each severity and where it comes from, the seeds, the digest of the code
that made each subset (the ``code`` param of the job that wrote it, as
docs/architecture.md's rerun rule computes it), how to load, evaluate and push the
dataset, and how to cite the papers.

What the card says of the run comes from the study plan as plain data
(:func:`vqarobust.plan.export.card_facts`, a Snakemake param: a change to any of it
reruns the export).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from vqarobust.hf_export import FEATURES, SPLIT, TASKS_FOLDER, config_name

if TYPE_CHECKING:
    from vqarobust.hf_export import Exported

# How to cite vqarobust and the four papers whose studies it reproduces (CITATION.cff;
# tests/test_hf_export.py holds the titles equal to it).
CITATION = """\
@software{vqarobust,
  title = {vqarobust: a Snakemake workflow for the robustness of visual question answering},
  author = {{The vqarobust authors}},
  version = {0.1.0},
  license = {MIT}
}
@article{ishmam2024visual,
  title = {Visual Robustness Benchmark for Visual Question Answering (VQA)},
  author = {Ishmam, Md Farhan and Tashdeed, Ishmam and Saadat, Talukder Asir and
            Ashmafee, Md Hamjajul and Kamal, Abu Raihan Mostofa and Hossain, Md. Azam},
  journal = {arXiv preprint arXiv:2407.03386},
  year = {2024}
}
@article{huang2023improving,
  title = {Improving Visual Question Answering Models through Robustness Analysis and
           In-Context Learning with a Chain of Basic Questions},
  author = {Huang, Jia-Hong and Alfadly, Modar and Ghanem, Bernard and Worring, Marcel},
  journal = {arXiv preprint arXiv:2304.03147},
  year = {2023}
}
@article{qiu2024benchmarking,
  title = {Benchmarking Robustness of Multimodal Image-Text Models under Distribution Shift},
  author = {Qiu, Jielin and Zhu, Yi and Shi, Xingjian and Wenzel, Florian and Tang, Zhiqiang
            and Zhao, Ding and Li, Bo and Li, Mu},
  journal = {Journal of Data-centric Machine Learning Research},
  note = {arXiv:2212.08044},
  year = {2024}
}
@inproceedings{gupta2022swapmix,
  title = {SwapMix: Diagnosing and Regularizing the Over-Reliance on Visual Context in
           Visual Question Answering},
  author = {Gupta, Vipul and Li, Zhuowan and Kortylewski, Adam and Zhang, Chenyu and
            Li, Yingwei and Yuille, Alan},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  note = {arXiv:2204.02285},
  year = {2022}
}
"""


def front_matter(done: Exported, facts: Mapping[str, Any]) -> dict[str, Any]:
    """The card's YAML header: licence, configs with their files, dataset_info."""
    features = [_yaml_feature(name, f) for name, f in FEATURES.items()]
    configs, infos = [], []
    for config, n in done.rows.items():
        entry: dict[str, Any] = {
            "config_name": config,
            "data_files": [{"split": SPLIT, "path": f"data/{config}/{SPLIT}-*.parquet"}],
        }
        if config == config_name("clean", 0):
            entry["default"] = True
        configs.append(entry)
        infos.append(
            {
                "config_name": config,
                "features": [dict(f) for f in features],
                "splits": [{"name": SPLIT, "num_bytes": done.nbytes[config], "num_examples": n}],
                "dataset_size": done.nbytes[config],
            }
        )
    return {
        "license": facts["license"][0],
        "pretty_name": f"vqarobust perturbed subsets of {facts['dataset']}",
        "task_categories": ["visual-question-answering"],
        "language": ["en"],
        "tags": ["robustness", "vqa", "corruptions", "vqarobust"],
        "configs": configs,
        "dataset_info": infos,
    }


def _yaml_feature(name: str, feature: Mapping[str, Any]) -> dict[str, Any]:
    """One feature as the card's YAML spells it (``datasets``' ``_to_yaml_list``)."""
    if feature["_type"] == "Image":
        return {"name": name, "dtype": "image"}
    if feature["_type"] == "Sequence":
        return {"name": name, "sequence": feature["feature"]["dtype"]}
    return {"name": name, "dtype": feature["dtype"]}


def _perturbation_section(name: str, p: Mapping[str, Any], configs: list[str]) -> list[str]:
    lines = [f"### `{name}`", "", p.get("description", "")]
    lines += [
        "",
        f"- modality: `{p['modality']}`; family: `{p['family']}`; kind: `{p['kind']}`",
        f"- from: {p['source']}",
        f"- configurations: {', '.join(f'`{c}`' for c in configs)}",
    ]
    if p.get("params"):
        lines.append(f"- settings: `{json.dumps(p['params'], sort_keys=True)}`")
    for rule, digest in p["code"].items():
        lines.append(f"- code of `{rule}`: `{digest}`")
    table = p.get("severity_table")
    if table:
        lines += ["", f"| severity | {', '.join(table['names'])} |", "|---|---|"]
        lines += [f"| {i} | `{row}` |" for i, row in enumerate(table["rows"], 1)]
    return [*lines, ""]


def dataset_card(done: Exported, facts: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """The card: front matter and body (module docstring)."""
    header = yaml.safe_dump(front_matter(done, facts), sort_keys=False, allow_unicode=True)
    by_name: dict[str, list[str]] = {}
    for config, subset in done.subsets.items():
        by_name.setdefault(subset.perturbation, []).append(config)
    rows = [
        f"| `{c}` | `{s.modality}` | `{s.perturbation}` | {s.severity} | {done.rows[c]:,} |"
        for c, s in done.subsets.items()
    ]
    body = [
        f"# vqarobust perturbed subsets of `{facts['dataset']}`",
        "",
        "Every subset of a vqarobust run, one configuration per perturbation and severity "
        "(`<perturbation>-<severity>`; `clean-0` is the clean subset), each with one split "
        f"`{SPLIT}`. A row is one question as the models of the run were asked it: the "
        "perturbed question of a text or basic-question set, the swapped image of a context "
        "swap. Images are the bytes the run stored (PNG or JPEG), not re-encoded.",
        "",
        f"Source dataset: `{facts['adapter']}`. Licence: {facts['license'][1]}.",
        "",
        "```python",
        "import datasets",
        f'ds = datasets.load_dataset("<this repository or folder>", "{next(iter(done.rows))}")',
        "```",
        "",
        "Columns: `question_id`, `image_id` (the swapped image's id in a context "
        "configuration), `image`, `question` (as asked), `answers` (the ten human answers as "
        "the dataset has them), `question_type`, `answer_type`, `perturbation`, `modality` "
        "(`clean`, `image`, `text`, `basic_question`, `context`), `severity` (the level; a "
        "context configuration's severity is the index of the question's swap of that kind).",
        "",
        "## Configurations",
        "",
        "| configuration | modality | perturbation | severity | rows |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    if done.left_out:
        body += ["Left out:", ""]
        body += [f"- `{name}`: {why}" for name, why in done.left_out.items()]
        body.append("")
    body += ["## Perturbations", ""]
    for name, configs in by_name.items():
        body += _perturbation_section(name, facts["perturbations"][name], configs)
    body += _closing(facts, info)
    return f"---\n{header}---\n\n" + "\n".join(body)


def _closing(facts: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    """The card's last sections: seeds and provenance, lmms-eval, pushing, citation."""
    sources = {k: v for k, v in info.items() if k not in ("skipped_images",)}
    return [
        "## Seeds and provenance",
        "",
        f"- the run's seed: {facts['seed']}; each item's random stream derives from it and "
        "the item's identity (a corrupted image's from the image id, corruption and "
        "severity; a context swap's from the question id), so a subset does not depend on "
        "job order or sharding (vqarobust's `seeding` module)",
        f"- corrupted images stored as `{json.dumps(facts['encoding'], sort_keys=True)}`",
        f"- vqarobust {facts['version']}; each perturbation's `code` above is the SHA-256 of "
        "the package code its job ran (its script's imports and the perturbation's own "
        "function, syntax trees without docstrings), the job's rerun key",
        f"- the prepared split: `{json.dumps(sources, sort_keys=True)}`",
        "",
        "## lmms-eval",
        "",
        f"`{TASKS_FOLDER}/` holds one lmms-eval task per configuration "
        "(`vqarobust_<perturbation>_<severity>`), grouped as `vqarobust`:",
        "",
        "```bash",
        f"lmms-eval --model <model> --include_path {TASKS_FOLDER} --tasks vqarobust "
        "--log_samples --output_path logs/",
        "```",
        "",
        "## Pushing to the Hub",
        "",
        "```bash",
        "hf upload <user>/<name> . --repo-type dataset",
        "```",
        "",
        "## Citation",
        "",
        "```bibtex",
        CITATION.rstrip(),
        "```",
        "",
    ]
