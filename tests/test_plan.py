"""The study plan (vqarobust.plan) in Python, without Snakemake: the subset catalogue of
every shipped study config, the inputs each job reads, a plan that cannot run refused at
build, and the rule files sharing nothing but the plan."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO
from tests.plans import STUDIES, study_config
from vqarobust.config import ConfigError, validate_config
from vqarobust.plan import KINDS, PlanError, StudyPlan


@pytest.fixture(scope="module")
def plans() -> dict[str, StudyPlan]:
    return {name: StudyPlan.build(study_config(name)) for name in STUDIES}


def test_the_default_catalogue_by_hand(plans):
    plan = plans["config"]
    kinds = [s.kind for s in plan.catalogue.values()]
    # 15 corruptions (14 benchmark ones and grayscale), the blank control, 9 text
    # perturbations and 3 rankers (docs/performance.md, "What the default run does").
    assert {k: kinds.count(k) for k in set(kinds)} == {
        "clean": 1,
        "corruption": 15,
        "control": 1,
        "text": 9,
        "ranker": 3,
    }
    assert plan.subset("clean").severities == (0,)
    assert plan.subset("snow").severities == (1, 2, 3, 4, 5)
    assert plan.subset("grayscale").severities == (1,)  # one level
    assert plan.subset("blank").severities == (1,)
    assert plan.subset("keyboard").modality == "text"
    assert plan.subset("bq_lasso").severities == tuple(range(1, 8))  # k = 21: 7 levels
    assert plan.subset("bq_lasso").modality == "basic_question"
    # 2 models x 29 subsets: 58 run_model jobs with inference_jobs: subset.
    assert len(plan.model_names) * len(plan.subsets) == 58


def test_every_study_plans_only_inputs_its_jobs_make(plans):
    for name, plan in plans.items():
        assert not plan.unmade_inputs(), name
        assert {s.kind for s in plan.catalogue.values()} <= set(KINDS)
        for subset in plan.catalogue.values():
            wildcards = SimpleNamespace(subset=subset.name)
            assert plan.infer.modality(wildcards) == subset.modality
            severities = plan.infer.subset_severities(wildcards)
            assert severities == (None if subset.kind == "context" else list(subset.severities))


def test_inputs_follow_the_subset_kind(plans):
    plan = plans["config"]
    model = plan.model_names[0]

    def inputs(subset: str) -> dict:
        return plan.infer.infer_input(SimpleNamespace(model=model, subset=subset))

    clean = "resources/datasets/easy-vqa/eval/images"
    assert inputs("clean")["images"] == [clean] and "question_sets" not in inputs("clean")
    assert inputs("snow")["images"] == [f"results/easy-vqa/images/snow/{s}" for s in range(1, 6)]
    assert inputs("blank")["images"] == ["results/easy-vqa/images/blank/1"]
    assert inputs("keyboard")["images"] == [clean]
    assert inputs("keyboard")["question_sets"] == [
        f"results/easy-vqa/questions/keyboard/{s}.parquet" for s in range(1, 6)
    ]
    assert len(inputs("bq_cosine")["question_sets"]) == 7
    scenes = plans["scenes"]
    swap = scenes.context_perturbations[0]
    got = scenes.infer.infer_input(SimpleNamespace(model=scenes.model_names[0], subset=swap))
    assert got["question_sets"] == [f"results/{scenes.dataset}/context/{swap}.parquet"]


def test_a_models_job_draws_its_attention_maps_unless_its_subsets_are_split(plans):
    """Per model, the attention table is the job's last output and its maps' folders are
    the clean and every corrupted one (no control, no resizing corruption); a model
    without attention writes the empty table; per subset, image_attention draws them."""
    plan = plans["config"]
    outputs = plan.infer.model_outputs()
    assert list(outputs)[-1] == "attention"
    assert outputs["attention"] == "results/{dataset}/attention/{model}.parquet"
    vilt = SimpleNamespace(model="vilt-tiny", dataset="easy-vqa")
    params = plan.infer.attention_params(vilt)
    assert (params["n"], params["seed"]) == (50, 0)
    assert params["subsets"][0] == ["clean", 0] and len(params["subsets"]) == 1 + 15 * 5 - 4
    assert ["blank", 1] not in params["subsets"]
    folders = plan.infer.job_input(vilt)["attention_images"]
    assert folders[0] == "resources/datasets/easy-vqa/eval/images"
    assert folders[1:] == [f"results/easy-vqa/images/{p}/{s}" for p, s in params["subsets"][1:]]
    config = copy.deepcopy(plan.config)
    config["models"]["chat"] = {"family": "image-text-to-text", "path_or_id": "org/chat"}
    with_chat = StudyPlan.build(validate_config(config))
    chat = SimpleNamespace(model="chat", dataset="easy-vqa")
    assert with_chat.infer.attention_params(chat) is None
    assert "attention_images" not in with_chat.infer.job_input(chat)
    config["inference_jobs"] = "subset"
    split = StudyPlan.build(validate_config(config))
    assert "attention" not in split.infer.model_outputs()
    assert split.infer.attention_params(vilt) is None
    # The attention code is in the per-model jobs' code param, not the per-subset ones'.
    from vqarobust.code_digest import code_digest
    from vqarobust.models import family_code_digest
    from vqarobust.plan.code import job_digest

    script = plan.scripts_dir / "run_model.py"
    family = family_code_digest(plan.config["models"]["vilt-tiny"]["family"])
    one = SimpleNamespace(model="vilt-tiny", subset="snow")
    assert split.code("run_model")(one) == job_digest(script, [family])
    attention = code_digest("vqarobust.attention")
    assert plan.code("run_model")(one) == job_digest(script, [family, attention])
    config["inference_jobs"], config["diagnostics"]["attention"]["n"] = "model", 0
    off = StudyPlan.build(validate_config(config))
    assert "attention" not in off.infer.model_outputs() and off.infer.attention_params(vilt) is None


def test_a_plan_that_reads_what_no_job_makes_fails_naming_the_key(plans, monkeypatch):
    config = study_config("config")
    model = next(iter(config["models"]))
    # An image folder of a subset that no corruption job makes.
    from vqarobust.plan.infer import InferStage

    nowhere = {"images": ["results/easy-vqa/images/nowhere/1"]}
    monkeypatch.setattr(InferStage, "infer_input", lambda self, wc: nowhere)
    with pytest.raises(PlanError, match=rf"config error at models\.{model}: .*/nowhere/1"):
        StudyPlan.build(copy.deepcopy(config))
    assert issubclass(PlanError, ConfigError)  # the Snakefile reports it as a config error


def test_a_checkpoint_folder_of_ones_own_is_no_unmade_input(tmp_path, monkeypatch):
    """A local checkpoint the entry names is the user's, even under resources/."""
    config = study_config("config")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "resources" / "weights" / "vilt").mkdir(parents=True)
    config["models"]["vilt-tiny"]["path_or_id"] = "resources/weights/vilt"
    plan = StudyPlan.build(config)
    wildcards = SimpleNamespace(model="vilt-tiny", subset="clean")
    assert plan.infer.infer_input(wildcards)["model"] == "resources/weights/vilt"


def test_the_plan_refuses_a_study_with_nothing_to_perturb():
    config = study_config("config")
    config["corruptions"], config["text"]["perturbations"] = [], []
    with pytest.raises(PlanError, match="config error at missing_weights"):
        StudyPlan.build(config)


def test_db_and_workflow_take_their_run_options_from_one_plan(plans, tmp_path):
    from vqarobust.analyses.base import settings_params
    from vqarobust.db import build_database

    plan = plans["config"]
    options = plan.analyze.run_options
    assert options.outside == ["grayscale"] and options.families["snow"] == "weather"
    assert options.seed == 0 and options.weights is not None
    # The workflow: each analyze job's settings param is its analysis at these options.
    for name, analysis in plan.analyze.analyses.items():
        params = plan.analyze.analysis_settings(SimpleNamespace(analysis=name))
        assert params == settings_params(analysis.settings(options)), name
    # The database: given the plan, no option of its own can be set beside it.
    with pytest.raises(TypeError, match=r"a plan sets every option; got \['seed'\]"):
        build_database(tmp_path / "x.duckdb", plan.analyze.database_inputs(), plan=plan, seed=1)


def test_the_rule_files_share_nothing_but_the_plan():
    spec = importlib.util.spec_from_file_location(
        "shared_rule_names", REPO / "benchmarks" / "shared_rule_names.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    shared = module.shared_names()
    assert set(shared) == {"PLAN"}, shared
    assert shared["PLAN"][0] == "rules/common.smk"
    assert not list(Path(REPO, "rules").glob("*_inputs.smk"))


@pytest.mark.workflow
def test_a_notebook_rebuilds_the_workflows_tables_from_the_same_plan(
    workflow_run, tmp_path, monkeypatch
):
    """build_database with the plan (its inputs and options) gives the workflow's own
    tables, row for row: one set of run options, not a second copy of the config's."""
    import duckdb

    from vqarobust.db import build_database

    workdir, config = workflow_run
    plan = StudyPlan.build(validate_config(copy.deepcopy(config)))
    monkeypatch.chdir(workdir)
    db = tmp_path / "notebook.duckdb"
    build_database(db, plan.analyze.database_inputs(), plan=plan)
    ours = workdir / "results" / plan.dataset / "robustness.duckdb"
    for table in ("accuracy", "vre_model", "submetrics", "mmi", "rscore", "intervals"):
        seen = []
        for path in (ours, db):
            with duckdb.connect(str(path), read_only=True) as con:
                rows = con.execute(f"SELECT * FROM {table}").fetchall()
                columns = [d[0] for d in con.description]
            # repr: NaN equals NaN, and the row order is the analysis's, not the SQL's.
            seen.append((columns, sorted(map(repr, rows))))
        assert seen[0] == seen[1], table
        assert seen[0][1], f"{table} is empty"


def test_swapmix_training_swaps_attributes_by_the_studys_rule(plans):
    """SwapMix training draws attribute swaps by context.attribute_swaps, as the
    evaluation's swaps do (the paper's k objects by default)."""
    from vqarobust.models.recipe import Recipe

    plan = plans["scenes-features"]
    params = plan.models.train_params(SimpleNamespace(model="lxmert-detector-swapmix"))
    assert params["attribute_swaps"] == "objects"
    assert Recipe.from_params(params).attribute_swaps == "objects"
