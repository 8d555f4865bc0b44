"""The Hugging Face export of a finished run (vqarobust.hf_export, docs/interop.md): the
dataset loads per configuration with datasets, its images are the shards' bytes, its card
parses as the Hub's, and its lmms-eval tasks name its configurations; the session's tiny
workflow run is exported once for the module."""

from __future__ import annotations

import ast
import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO
from vqarobust import hf_card, hf_export, lmms_task_utils, lmms_tasks, store
from vqarobust.plan import export as export_stage

datasets = pytest.importorskip("datasets")
hub = pytest.importorskip("huggingface_hub")


class _TaskLoader(yaml.SafeLoader):
    """PyYAML with lmms-eval's ``!function module.name`` tag, read as its text."""


_TaskLoader.add_constructor("!function", lambda loader, node: ("function", node.value))


def _read_yaml_text(text: str) -> dict:
    return yaml.load(text, Loader=_TaskLoader)  # noqa: S506 (a SafeLoader)


def _read_task(path: Path) -> dict:
    return _read_yaml_text(path.read_text())


@pytest.fixture(scope="module")
def exported(workflow_run, tmp_path_factory):
    """The tiny run exported by the CLI, as a user runs it."""
    workdir, config = workflow_run
    out = tmp_path_factory.mktemp("hf") / "dataset"
    proc = subprocess.run(
        [sys.executable, "-m", "vqarobust.cli", "hf-export", "results/easy-vqa", "--out", out],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    return workdir, config, out


def _load(folder: Path, config: str, cache: Path):
    return datasets.load_dataset(str(folder), config, split=hf_export.SPLIT, cache_dir=str(cache))


def _configs(config: dict) -> list[str]:
    """The configurations the tiny config makes, written out by hand."""
    sev = config["severities"]
    names = ["clean-0"]
    names += [f"{c}-{s}" for c in config["corruptions"] for s in sev]
    names += ["blank-1"]  # the default control, at its one severity
    names += [f"{p}-{s}" for p in config["text"]["perturbations"] for s in sev]
    levels = range(1, config["basic_questions"]["k"] // 3 + 1)
    names += [f"{r}-{n}" for r in config["basic_questions"]["rankers"] for n in levels]
    return names


@pytest.mark.workflow
def test_each_configuration_loads_with_the_questions_as_asked(exported, tmp_path):
    workdir, config, out = exported
    questions = pq.read_table(workdir / "resources/datasets/easy-vqa/eval/questions.parquet")
    by_id = {r["question_id"]: r for r in questions.to_pylist()}
    card = hub.DatasetCard((out / "README.md").read_text())
    names = [c["config_name"] for c in card.data.configs]
    assert names == _configs(config)
    for name in names:
        ds = _load(out, name, tmp_path)
        assert ds.column_names == list(hf_export.COLUMNS)
        assert isinstance(ds.features["image"], datasets.Image)
        assert ds.features["answers"].feature.dtype == "string"
        assert ds.num_rows == questions.num_rows  # no set of the tiny run drops a question
        perturbation, severity = name.rsplit("-", 1)
        assert set(ds["perturbation"]) == {perturbation}
        assert set(ds["severity"]) == {int(severity)}
        rows = ds.remove_columns("image").to_list()
        assert [r["image_id"] for r in rows] == sorted(r["image_id"] for r in rows)
        for row in rows:
            source = by_id[row["question_id"]]
            assert row["answers"] == source["answers"]
            assert row["image_id"] == source["image_id"]
            assert row["question_type"] == source["question_type"]
    # A text configuration asks the perturbed question of its set, an image one the question.
    keyboard = {r["question_id"]: r["question"] for r in _load(out, "keyboard-3", tmp_path)}
    asked = pq.read_table(workdir / "results/easy-vqa/questions/keyboard/3.parquet").to_pylist()
    assert keyboard == {r["question_id"]: r["perturbed"] for r in asked}
    assert sum(r["original"] != r["perturbed"] for r in asked) > 0
    bright = _load(out, "brightness-3", tmp_path)
    assert bright["question"] == [by_id[q]["question"] for q in bright["question_id"]]
    assert set(_load(out, "clean-0", tmp_path)["modality"]) == {"clean"}
    assert set(_load(out, "bq_lasso-2", tmp_path)["modality"]) == {"basic_question"}


@pytest.mark.workflow
def test_the_images_are_the_shards_bytes(exported, tmp_path):
    workdir, _, out = exported
    for folder in sorted((out / "data").iterdir()):
        perturbation, severity = folder.name.rsplit("-", 1)
        shard_dir = (
            workdir / f"results/easy-vqa/images/{perturbation}/{severity}"
            if (workdir / f"results/easy-vqa/images/{perturbation}").is_dir()
            else workdir / "resources/datasets/easy-vqa/eval/images"
        )
        table = pa.concat_tables(pq.read_table(p) for p in sorted(folder.glob("*.parquet")))
        ids = table.column("image_id").to_pylist()
        stored = store.ImageShards(shard_dir).read(set(ids))
        images = table.column("image").to_pylist()
        assert [i["bytes"] for i in images] == [stored[i] for i in ids], folder.name
        assert [i["path"] for i in images] == [f"{i}.png" for i in ids]
    # As datasets hands them out undecoded, and decoded: the pixels of the shard's bytes.
    ds = _load(out, "gaussian_noise-1", tmp_path)
    raw = ds.cast_column("image", datasets.Image(decode=False))
    shards = store.ImageShards(workdir / "results/easy-vqa/images/gaussian_noise/1")
    first = raw[0]
    assert first["image"]["bytes"] == shards.read([first["image_id"]])[first["image_id"]]
    pixels = np.asarray(ds[0]["image"].convert("RGB"))
    assert np.array_equal(pixels, store.decode_image(first["image"]["bytes"]))


@pytest.mark.workflow
def test_the_card_is_the_hubs_and_says_what_made_each_subset(exported):
    workdir, config, out = exported
    text = (out / "README.md").read_text()
    card = hub.DatasetCard(text)
    data = card.data.to_dict()
    assert data["license"] == "mit"  # easy-VQA's
    infos = {i["config_name"]: i for i in data["dataset_info"]}
    assert list(infos) == _configs(config)
    for info in infos.values():
        assert [f["name"] for f in info["features"]] == list(hf_export.COLUMNS)
        assert info["splits"][0]["num_examples"] == 52
    for entry in data["configs"]:
        files = list(out.glob(entry["data_files"][0]["path"]))
        assert len(files) == 1, entry
    assert [c["config_name"] for c in data["configs"] if c.get("default")] == ["clean-0"]
    # hub's own parser, as the Hub validates a card's metadata
    assert hub.DatasetCardData(**data).to_dict()["configs"] == data["configs"]
    # Each corruption's code is the code param its corrupt_images job ran with, as
    # Snakemake recorded it.
    metadata = workdir / ".snakemake" / "metadata"
    for corruption in config["corruptions"]:
        target = f"results/easy-vqa/images/{corruption}/1"
        record = json.loads((metadata / base64.b64encode(target.encode()).decode()).read_text())
        recorded = ast.literal_eval(record["params"][0])
        assert f"- code of `corrupt_images`: `{recorded}`" in text
    assert "| 3 | `0.18` |" in text  # gaussian_noise's sd at severity 3
    assert f"the run's seed: {config['seed']}" in text


def test_the_card_cites_the_papers_of_citation_cff():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    citation = " ".join(hf_card.CITATION.split())
    for reference in cff["references"]:
        assert f"title = {{{' '.join(reference['title'].split())}}}" in citation
        for author in reference["authors"]:
            assert f"{author['family-names']}, {author['given-names']}" in citation


def test_severity_tables_are_read_from_the_function():
    def shift(image, severity, rng):
        a, b = ((1, 2.5), (3, 4), (5, 6))[severity - 1]
        return image

    def plain(image, severity, rng):
        return image

    assert export_stage.severity_table(shift) == (["a", "b"], ["(1, 2.5)", "(3, 4)", "(5, 6)"])
    assert export_stage.severity_table(plain) is None


@pytest.mark.workflow
def test_the_tasks_name_every_configuration(exported):
    _, config, out = exported
    folder = out / hf_export.TASKS_FOLDER
    template = _read_task(folder / lmms_tasks.TEMPLATE)
    assert template["dataset_path"] == str(out.resolve())
    assert template["test_split"] == hf_export.SPLIT
    assert template["doc_to_target"] == "answers" and "answers" in hf_export.COLUMNS
    post = template["lmms_eval_specific_kwargs"]["default"]["post_prompt"]
    assert post == "\nAnswer the question using a single word or phrase."
    functions = [v[1] for v in template.values() if isinstance(v, tuple) and v[0] == "function"] + [
        m["aggregation"][1] for m in template["metric_list"] if isinstance(m["aggregation"], tuple)
    ]
    utils = (folder / "utils.py").read_text()
    for name in functions:
        module, func = name.split(".")
        assert module == "utils" and f"def {func}(" in utils, name
    tasks = {}
    for path in sorted(folder.glob("vqarobust_*.yaml")):
        task = _read_task(path)
        assert task["include"] == lmms_tasks.TEMPLATE
        tasks[task["task"]] = task["dataset_name"]
    configs = _configs(config)
    assert sorted(tasks.values()) == sorted(configs)
    assert "vqarobust_gaussian_noise_3" in tasks and tasks["vqarobust_bq_lasso_2"] == "bq_lasso-2"
    groups = {p.stem: _read_task(p) for p in folder.glob("_vqarobust*.yaml")}
    assert groups["_vqarobust"]["task"] == [
        "vqarobust_clean_0",
        "vqarobust_image",
        "vqarobust_text",
    ]
    image = groups["_vqarobust_image"]["task"]
    text = groups["_vqarobust_text"]["task"]
    assert "vqarobust_blank_1" in image and "vqarobust_keyboard_1" in text
    assert "vqarobust_bq_cosine_2" in text  # basic questions perturb the question
    assert sorted(["vqarobust_clean_0", *image, *text]) == sorted(tasks)


@pytest.mark.workflow
def test_the_rule_runs_on_demand_and_writes_what_the_command_does(exported, tmp_path):
    workdir, _, out = exported
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy, symlinks=True)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(copy)]
    plain = subprocess.run([*cmd, "-n"], capture_output=True, text=True, check=True)
    assert "export_huggingface" not in plain.stdout + plain.stderr  # not part of `all`
    proc = subprocess.run([*cmd, "--cores", "2", "hf_dataset"], capture_output=True, text=True)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    ran = set(re.findall(r"^(?:local)?rule (\w+):$", said, flags=re.MULTILINE))
    assert ran == {"export_huggingface", "hf_dataset"}, said[-3000:]
    made = copy / "results" / "easy-vqa" / "huggingface"
    assert (made / "README.md").read_text() == (out / "README.md").read_text()
    files = sorted(p.relative_to(out) for p in (out / "data").rglob("*.parquet"))
    assert files == sorted(p.relative_to(made) for p in (made / "data").rglob("*.parquet"))
    for name in files:
        assert (made / name).read_bytes() == (out / name).read_bytes(), name
    template = _read_task(made / hf_export.TASKS_FOLDER / lmms_tasks.TEMPLATE)
    assert template["dataset_path"] == str(made.resolve())


@pytest.mark.workflow
def test_the_command_refuses_a_used_folder_and_a_folder_that_is_no_run(exported, tmp_path):
    workdir, _, out = exported
    said = []
    for args in (["results/easy-vqa", "--out", str(out)], ["results", "--out", str(tmp_path)]):
        proc = subprocess.run(
            [sys.executable, "-m", "vqarobust.cli", "hf-export", *args],
            capture_output=True,
            text=True,
            cwd=workdir,
        )
        assert proc.returncode == 2, proc.stderr
        said.append(proc.stderr)
    assert f"{out} exists and is not an empty folder" in said[0]
    assert "results is no run's results/<dataset> folder" in said[1]
    # A run that lacks one subset's file: named, and nothing is written.
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy, symlinks=True)
    (copy / "results/easy-vqa/questions/keyboard/3.parquet").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "vqarobust.cli", "hf-export", "results/easy-vqa", "--out", "hf"],
        capture_output=True,
        text=True,
        cwd=copy,
    )
    assert proc.returncode == 2
    assert "has not made results/easy-vqa/questions/keyboard/3.parquet" in proc.stderr
    assert not (copy / "hf").exists()


def test_context_configurations_ask_each_question_about_its_swapped_image(tmp_path):
    # Two questions; the set holds swap 1 of both and swap 2 of question 11 only, each on
    # its own swapped image (ids 100, 101, 102).
    questions = pa.table(
        {
            "question_id": [10, 11],
            "image_id": [1, 1],
            "question": ["what colour?", "how many?"],
            "answers": [["red"] * 10, ["2"] * 10],
            "question_type": ["what color", "how many"],
            "answer_type": ["other", "number"],
        },
        schema=store.QUESTION_SCHEMA,
    )
    store.write_table(questions, tmp_path / "questions.parquet")
    rows = {"question_id": [10, 11, 11], "image_id": [100, 101, 102], "severity": [1, 1, 2]}
    n = len(rows["question_id"])
    swaps = pa.table(
        rows
        | {
            "original": ["q"] * n,
            "perturbed": ["q"] * n,
            "perturbation": ["swap_class"] * n,
            "changed": [True] * n,
            "similarity": [None] * n,
            "tries": [None] * n,
        }
    ).select(store.QUESTION_SET_SCHEMA.names)
    store.write_table(swaps.cast(store.QUESTION_SET_SCHEMA), tmp_path / "swap_class.parquet")
    encoded = {
        i: store.encode_image(np.full((4, 4, 3), i % 256, np.uint8)) for i in (100, 101, 102)
    }
    store.write_image_shards(
        [
            {"image_id": i, "bytes": b, "format": "png", "width": 4, "height": 4}
            for i, b in encoded.items()
        ],
        tmp_path / "images",
    )
    entry = {
        "name": "swap_class",
        "kind": "context",
        "modality": "context",
        "images": "images",
        "question_set": "swap_class.parquet",
    }
    subsets = hf_export.expand([entry], tmp_path)
    assert [s.config for s in subsets] == ["swap_class-1", "swap_class-2"]
    tables = [hf_export.subset_table(questions, s, tmp_path) for s in subsets]
    assert tables[0].column("image_id").to_pylist() == [100, 101]
    assert tables[0].column("question_id").to_pylist() == [10, 11]
    assert tables[1].to_pylist()[0] | {"answers": None} == {
        "question_id": 11,
        "image_id": 102,
        "question": "how many?",
        "answers": None,
        "question_type": "how many",
        "answer_type": "number",
        "perturbation": "swap_class",
        "modality": "context",
        "severity": 2,
    }
    files, _ = hf_export.write_config(tables[1], tmp_path / "images", tmp_path / "out")
    written = pq.read_table(files[0]).column("image").to_pylist()
    assert written == [{"bytes": encoded[102], "path": "102.png"}]


def test_lmms_eval_scoring_by_hand():
    def same(text: str) -> str:
        return text

    # Two of ten humans said "two": left out, one of the others matches (1/3, twice),
    # kept, two do (2/3, eight times): (2/3 + 16/3) / 10 = 0.6.
    answers = ["two"] * 2 + ["three"] * 8
    assert lmms_task_utils.vqa_score("two", answers, same) == pytest.approx(0.6)
    # Three matches: 2/3 three times, 1 seven times: 0.9. Ten: 1. None: 0.
    assert lmms_task_utils.vqa_score("two", ["two"] * 3 + ["x"] * 7, same) == pytest.approx(0.9)
    assert lmms_task_utils.vqa_score("two", ["two"] * 10, same) == 1.0
    assert lmms_task_utils.vqa_score("four", answers, same) == 0.0
    doc = {"question": "what is it?"}
    kwargs = {"pre_prompt": "Q: ", "post_prompt": lmms_task_utils.POST_PROMPT}
    assert lmms_task_utils.vqarobust_doc_to_text(doc) == "what is it?"
    assert (
        lmms_task_utils.vqarobust_doc_to_text(doc, kwargs)
        == "Q: what is it?\nAnswer the question using a single word or phrase."
    )
    assert lmms_task_utils.vqarobust_count([{}, {}, {}]) == 3


def test_task_names_keep_word_characters_only():
    assert lmms_tasks.task_name("gaussian_noise", 3) == "vqarobust_gaussian_noise_3"
    assert lmms_tasks.task_name("my-blur.v2", 1) == "vqarobust_my_blur_v2_1"
    assert hf_export.config_name("my-blur.v2", 1) == "my-blur.v2-1"
    files = lmms_tasks.task_files([("my-blur-1", "my-blur", 1, "image")], "user/name")
    assert _read_yaml_text(files[lmms_tasks.TEMPLATE])["dataset_path"] == "user/name"
    assert _read_yaml_text(files["vqarobust_my_blur_1.yaml"])["dataset_name"] == "my-blur-1"
    twins = [("my-blur-1", "my-blur", 1, "image"), ("my_blur-1", "my_blur", 1, "image")]
    with pytest.raises(ValueError, match="both make task 'vqarobust_my_blur_1'"):
        lmms_tasks.task_files(twins, "user/name")


def test_every_study_exports_what_its_pixel_models_read():
    from tests.plans import STUDIES, study_config
    from vqarobust.plan import StudyPlan

    seen_context = False
    for name in STUDIES:
        plan = StudyPlan.build(study_config(name))
        entries = export_stage.plan_entries(plan)
        made = plan.made_paths() | {plan.questions}
        inputs = plan.export.export_input(None)
        assert set(inputs["subsets"]) <= made, name
        facts = export_stage.card_facts(plan)  # every study's card can be written
        assert set(facts["perturbations"]) >= {e["name"] for e in entries["subsets"]}, name
        model = plan.pixel_models[0] if plan.pixel_models else None
        for entry in entries["subsets"] if model else []:  # feature models read no pixels
            wc = SimpleNamespace(dataset=plan.dataset, model=model, subset=entry["name"])
            read = plan.infer.infer_input(wc)
            if entry["kind"] == "context":
                seen_context = True
                assert [entry["images"]] == read["images"]
                assert [entry["question_set"]] == read["question_sets"]
                continue
            levels = entry["levels"]
            assert [s for s, _, _ in levels] == list(plan.subset(entry["name"]).severities)
            assert list(dict.fromkeys(i for _, i, _ in levels)) == read["images"]
            sets = [q for _, _, q in levels if q is not None]
            assert sets == read.get("question_sets", []), (name, entry["name"])
        left = entries["left_out"]
        if plan.context_perturbations and not plan.pixel_models:
            assert set(left) == set(plan.context_perturbations), name
    assert seen_context  # the scenes study swaps pixels
