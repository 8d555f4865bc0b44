"""Answers another harness logged, imported as predictions (vqarobust.harness_logs reads
them, vqarobust.harness_import maps and writes them): the logs are written here in
lmms-eval's and VLMEvalKit's own formats from predictions made as the workflow makes
them, and the import must give those predictions back, so every table of the analyses
equals the workflow's own. Then the scoring differences between lmms-eval's VQAv2 metric
and the official one (docs/interop.md)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.harness_samples import DATE
from vqarobust import store
from vqarobust.harness_import import Target, import_answers, import_job
from vqarobust.harness_logs import (
    config_name,
    exported_question_ids,
    lmms_eval_files,
    logs_sha256,
    read_lmms_eval,
    read_vlmevalkit,
    task_name,
)
from vqarobust.inference import Subset
from vqarobust.metrics.vqa_accuracy import (
    ARTICLES,
    CONTRACTIONS,
    NUMBER_WORDS,
    PUNCT,
    score_predictions,
    vqa_accuracy,
    vqa_accuracy_both,
    vqa_accuracy_plain,
)
from vqarobust.models.replies import ANSWERED, EMPTY, Responses

MODEL = "m"
# (modality, perturbation, severity), and the predictions file each lands in.
SUBSETS = [
    ("clean", "clean", 0),
    ("image", "gaussian_noise", 1),
    ("image", "gaussian_noise", 3),
    ("image", "brightness", 1),
    ("image", "brightness", 3),
]
FAMILIES = {"gaussian_noise": "noise", "brightness": "weather"}


def _questions(easy_vqa_eval) -> list[dict]:
    """The eval questions in the order the workflow asks them (image, then question id)."""
    table = store.read_questions(easy_vqa_eval["questions"])
    return table.sort_by([("image_id", "ascending"), ("question_id", "ascending")]).to_pylist()


def _workflow_predictions(questions: list[dict], k: int, subset: tuple) -> pa.Table:
    """One subset's predictions as the inference loop records a generative model's: the
    right answer, a wrong one with a longer raw reply, or a blank reply (``empty``)."""
    modality, perturbation, severity = subset
    responses = Responses.sized(len(questions))
    for i, q in enumerate(questions):
        if (i + k) % 13 == 4:
            responses.set(i, "  ", "  ")
        elif (i + 2 * k) % 3 == 0:
            responses.set(i, "wrong", "The answer is: wrong.")
        else:
            responses.set(i, q["answers"][0], q["answers"][0])
    n = len(questions)
    return pa.table(
        {
            "question_id": pa.array([q["question_id"] for q in questions], pa.int64()),
            "answer": pa.array(responses.answers, pa.string()),
            "raw_answer": pa.array(responses.raw, pa.string()),
            "model": pa.array([MODEL] * n, pa.string()),
            "modality": pa.array([modality] * n, pa.string()),
            "perturbation": pa.array([perturbation] * n, pa.string()),
            "severity": pa.array([severity] * n, store.SEVERITY),
            "truncated": pa.array([False] * n, pa.bool_()),
            "status": pa.array(responses.status, pa.string()),
            "finish_reason": pa.array([None] * n, pa.string()),
        },
        schema=store.PREDICTION_SCHEMA,
    )


def _export(folder: Path, questions: list[dict]) -> dict[str, list[int]]:
    """A miniature of the exported dataset: a card whose ``configs`` name each subset's
    two Parquet files, rows in another order than the workflow's (by question text, then
    id, descending), so that doc_id means the export's row. Each config's question ids
    in row order."""
    rows = sorted(questions, key=lambda q: (q["question"], q["question_id"]), reverse=True)
    configs, order = [], {}
    for modality, perturbation, severity in SUBSETS:
        name = config_name(perturbation, severity)
        half = len(rows) // 2
        for part, chunk in enumerate([rows[:half], rows[half:]]):
            table = pa.table(
                {
                    **{k: [q[k] for q in chunk] for k in store.QUESTION_SCHEMA.names},
                    "perturbation": [perturbation] * len(chunk),
                    "modality": [modality] * len(chunk),
                    "severity": [severity] * len(chunk),
                }
            )
            path = folder / "data" / name / f"test-{part:05d}-of-00002.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
        configs.append(
            {"config_name": name, "data_files": [{"split": "test", "path": f"data/{name}/*"}]}
        )
        order[name] = [q["question_id"] for q in rows]
    card = yaml.safe_dump({"configs": configs}, sort_keys=False)
    (folder / "README.md").write_text(f"---\n{card}---\n# vqarobust miniature\n")
    return order


def lmms_eval_vqav2(prediction: str, answers: list[dict]) -> float:
    """lmms-eval 0.7's VQAv2 score (``tasks/vqav2/utils.py``), from its documented steps:
    newlines and tabs to spaces and strip, then the EvalAI punctuation and digit/article
    steps on the prediction and on every human answer (dicts with ``answer``); then for
    each human answer, the others are those *unequal as dicts* to it, and the score is
    the mean of min(1, matches among the others / 3). Its punctuation step looks for a
    digit-comma-digit group with ``(?<=\\d)(\\,)+(?=\\d)`` (one or more commas)."""

    def punctuation(text: str) -> str:
        out = text
        digit_comma = re.search(r"(?<=\d)(\,)+(?=\d)", text) is not None
        for p in PUNCT:
            if p + " " in text or " " + p in text or digit_comma:
                out = out.replace(p, "")
            else:
                out = out.replace(p, " ")
        return re.sub(r"(?!<=\d)(\.)(?!\d)", "", out, count=int(re.UNICODE))

    def digit_article(text: str) -> str:
        words = [NUMBER_WORDS.get(w, w) for w in text.lower().split()]
        return " ".join(CONTRACTIONS.get(w, w) for w in words if w not in ARTICLES)

    def clean(text: str) -> str:
        return digit_article(punctuation(text.replace("\n", " ").replace("\t", " ").strip()))

    gts = [{**a, "answer": clean(a["answer"])} for a in answers]
    pred = clean(prediction)
    scores = []
    for gt in gts:
        others = [a for a in gts if a != gt]
        scores.append(min(1.0, sum(a["answer"] == pred for a in others) / 3))
    return sum(scores) / len(scores)


def _lmms_answers(answers: list[str]) -> list[dict]:
    """Human answers as VQAv2's Hugging Face rows hold them (lmms-lab/VQAv2)."""
    return [
        {"answer": a, "answer_confidence": "yes", "answer_id": i + 1} for i, a in enumerate(answers)
    ]


def _write_lmms_eval_logs(
    folder: Path,
    questions: list[dict],
    predictions: dict[tuple, pa.Table],
    order: dict[str, list[int]],
    name_questions: bool = False,
) -> Path:
    """Each subset's sample log as lmms-eval 0.7 writes it with --log_samples: under the
    model's folder, one ``<date>_samples_<task>.jsonl``, a line per document in doc_id
    order with the keys ``EvaluationTracker.save_results_samples`` keeps (``doc`` and
    ``arguments`` dropped, ``input`` added, single responses flattened, ``resps`` left
    out where it equals ``filtered_resps``). ``name_questions``: the task's
    process_results returns VQAv2's ``submission`` dict (it names the question id)."""
    out = folder / "org__model"
    out.mkdir(parents=True)
    by_id = {q["question_id"]: q for q in questions}
    for subset, table in predictions.items():
        _, perturbation, severity = subset
        rows = {r["question_id"]: r for r in table.to_pylist()}
        lines = []
        for doc_id, qid in enumerate(order[config_name(perturbation, severity)]):
            if qid not in rows:
                continue  # a question this test leaves out of the harness's run
            row, q = rows[qid], by_id[qid]
            # The harness scored its filtered text: the answer, or the blank reply.
            text = row["answer"] if row["answer"] is not None else row["raw_answer"]
            sample = {"doc_id": doc_id, "target": str(q["answers"][0])}
            if row["raw_answer"] != text:
                sample["resps"] = [row["raw_answer"]]
            sample["filtered_resps"] = text
            sample["token_counts"] = [None]
            sample["doc_hash"] = f"{qid:064x}"
            sample["exact_match"] = lmms_eval_vqav2(text, _lmms_answers(q["answers"]))
            if name_questions:
                sample["submission"] = {"question_id": qid, "answer": text.strip()}
            sample["input"] = f"{q['question']}\nAnswer the question using a single word or phrase."
            lines.append(json.dumps(sample, ensure_ascii=False))
        task = task_name(perturbation, severity)
        (out / f"{DATE}_samples_{task}.jsonl").write_text("\n".join(lines) + "\n")
    return out


@pytest.fixture()
def study(tmp_path, easy_vqa_eval):
    """The workflow's predictions of model m on every subset (one file per perturbation,
    as run_model writes them), the exported miniature and its row orders."""
    questions = _questions(easy_vqa_eval)
    predictions = {s: _workflow_predictions(questions, k, s) for k, s in enumerate(SUBSETS)}
    files = []
    for perturbation in dict.fromkeys(s[1] for s in SUBSETS):
        parts = [t for s, t in predictions.items() if s[1] == perturbation]
        path = tmp_path / "workflow" / MODEL / f"{perturbation}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        store.write_table(pa.concat_tables(parts), path)
        files.append(path)
    exported = tmp_path / "exported"
    exported.mkdir()
    order = _export(exported, questions)
    return questions, predictions, files, exported, order


def _targets(questions: list[dict], exported: Path | None = None) -> list[Target]:
    ids = [q["question_id"] for q in questions]
    return [
        Target(
            m,
            p,
            s,
            ids,
            exported_question_ids(exported, config_name(p, s)) if exported else None,
        )
        for m, p, s in SUBSETS
    ]


def test_task_and_config_names_follow_the_export():
    assert task_name("gaussian_noise", 3) == "vqarobust_gaussian_noise_3"
    assert task_name("jpeg-q.x", 2) == "vqarobust_jpeg_q_x_2"
    assert config_name("clean", 0) == "clean-0"


def test_the_export_row_order_is_the_one_datasets_reads(study):
    """doc_id is the row of the config's split as ``datasets`` loads it: the card's data
    files, sorted, one after the other."""
    datasets = pytest.importorskip("datasets")
    questions, _, _, exported, order = study
    name = config_name("gaussian_noise", 3)
    assert exported_question_ids(exported, name) == order[name]
    loaded = datasets.load_dataset(str(exported), name, split="test")
    assert loaded["question_id"] == order[name]
    assert order[name] != [q["question_id"] for q in questions]  # the orders differ


def test_lmms_eval_logs_import_to_the_workflow_predictions(study, tmp_path):
    """Records without a question id (lmms-eval drops ``doc``) map by doc_id through the
    export's rows; the imported tables equal the workflow's, raw replies and empty
    answers included."""
    questions, predictions, _, exported, order = study
    logs = _write_lmms_eval_logs(tmp_path / "logs", questions, predictions, order)
    tables, counts = import_answers(read_lmms_eval(logs), _targets(questions, exported), MODEL)
    for table, subset in zip(tables, SUBSETS, strict=True):
        assert table.equals(predictions[subset]), subset
    n = len(questions)
    empty = sum(t.column("status").to_pylist().count(EMPTY) for t in predictions.values())
    assert empty > 0
    assert (counts.records, counts.imported, counts.empty) == (5 * n, 5 * n, empty)
    assert counts.problems() == [] and counts.other_tasks == {}


def test_records_that_name_their_question_need_no_export_and_must_agree(study, tmp_path):
    questions, predictions, _, exported, order = study
    logs = _write_lmms_eval_logs(tmp_path / "logs", questions, predictions, order, True)
    records = read_lmms_eval(logs)
    assert all(r.question_id is not None for r in records)
    tables, _ = import_answers(records, _targets(questions), MODEL)
    assert all(t.equals(predictions[s]) for t, s in zip(tables, SUBSETS, strict=True))
    # Logs of another export: the row says one question, the record another.
    reordered = [
        t
        if t.perturbation != "brightness"
        else Target(t.modality, t.perturbation, t.severity, t.question_ids, list(reversed(t.rows)))
        for t in _targets(questions, exported)
    ]
    with pytest.raises(ValueError, match="logs are of another export"):
        import_answers(records, reordered, MODEL)
    # Without a question id and without the export, a doc_id maps to nothing.
    bare = _write_lmms_eval_logs(tmp_path / "bare", questions, predictions, order)
    with pytest.raises(ValueError, match="give the exported dataset"):
        import_answers(read_lmms_eval(bare), _targets(questions), MODEL)


def test_unmapped_records_and_missing_answers_are_counted(study, tmp_path):
    """Another task's records, a doc_id past the export's rows and a question the
    subset does not ask are counted apart; the questions left without a record too; an
    older run of a task is superseded by the newer."""
    questions, predictions, _, exported, order = study
    logs = _write_lmms_eval_logs(tmp_path / "logs", questions, predictions, order)
    (logs / f"{DATE}_samples_vqav2_val.jsonl").write_text(
        json.dumps({"doc_id": 0, "filtered_resps": "yes"}) + "\n"
    )
    clean = logs / f"{DATE}_samples_vqarobust_clean_0.jsonl"
    lines = clean.read_text().splitlines()
    # The clean log loses its first two documents and gains one past the export's rows.
    extra = {**json.loads(lines[0]), "doc_id": len(questions) + 4}
    clean.write_text("\n".join([*lines[2:], json.dumps(extra)]) + "\n")
    older = logs / "20250101_000000_samples_vqarobust_clean_0.jsonl"
    older.write_text(json.dumps({"doc_id": 0, "filtered_resps": "old"}) + "\n")
    assert lmms_eval_files(logs)["vqarobust_clean_0"] == clean
    targets = _targets(questions, exported)
    # The noise/1 subset asks all questions but the first (a fidelity drop, say).
    first = targets[1].question_ids[0]
    targets[1] = Target("image", "gaussian_noise", 1, targets[1].question_ids[1:], targets[1].rows)
    tables, counts = import_answers(read_lmms_eval(logs), targets, MODEL)
    n = len(questions)
    assert counts.records == 5 * n - 2 + 1 + 1
    assert counts.other_tasks == {"vqav2_val": 1}
    assert counts.unknown_questions == {"vqarobust_clean_0": 1, "vqarobust_gaussian_noise_1": 1}
    assert counts.missing == {"vqarobust_clean_0": 2}
    assert counts.imported == 5 * n - 2 - 1
    assert tables[0].num_rows == n - 2 and first not in tables[1].column("question_id").to_pylist()
    assert len(counts.problems()) == 2


def _write_lmms_eval_results(logs: Path) -> None:
    """The run's ``<date>_results.json`` as lmms-eval aggregates it: per task, the mean
    of the samples' ``exact_match`` under key ``exact_match,none`` (and its stderr)."""
    results = {}
    for path in sorted(logs.glob(f"{DATE}_samples_*.jsonl")):
        task = path.name.removeprefix(f"{DATE}_samples_").removesuffix(".jsonl")
        scores = [json.loads(line)["exact_match"] for line in path.read_text().splitlines()]
        results[task] = {
            "alias": task,
            "exact_match,none": sum(scores) / len(scores),
            "exact_match_stderr,none": "N/A",
        }
    (logs / f"{DATE}_results.json").write_text(json.dumps({"results": results}, indent=2))


def test_imported_accuracy_equals_lmms_evals_aggregate_under_the_same_metric(study, tmp_path):
    """Scored with ``vqa_accuracy_both`` (lmms-eval's VQAv2 normalization), the
    workflow's accuracy of each imported subset is lmms-eval's own aggregate over the
    same answers (its ``exact_match`` mean), once the blank replies lmms-eval scores 0
    are left out as the workflow leaves them. easy-VQA's human answers are lower-case
    words without number words or articles, which no normalization changes: there the
    official metric gives the same numbers (the cases where it does not are by hand,
    below)."""
    from vqarobust.harness_logs import lmms_eval_results

    questions, predictions, _, exported, order = study
    answered = {
        s: t.filter(pa.compute.equal(t.column("status"), ANSWERED)) for s, t in predictions.items()
    }
    logs = _write_lmms_eval_logs(tmp_path / "logs", questions, answered, order, True)
    _write_lmms_eval_results(logs)
    theirs = lmms_eval_results(logs.parent)
    tables, _ = import_answers(read_lmms_eval(logs), _targets(questions), MODEL)
    frame = pl.from_arrow(pa.concat_tables(tables))
    for metric in ("vqa_accuracy_both", "vqa_accuracy"):
        scored = score_predictions(frame, pl.DataFrame(questions), metric)
        means = scored.group_by("perturbation", "severity").agg(pl.col("score").mean())
        assert means.height == len(SUBSETS)
        for perturbation, severity, accuracy in means.iter_rows():
            lmms = theirs[task_name(perturbation, severity)]["exact_match,none"]
            assert accuracy == pytest.approx(lmms, abs=1e-12), (metric, perturbation)


def _write_vlmevalkit(path: Path, rows: list[dict]) -> None:
    """A prediction file as VLMEvalKit dumps one with PRED_FORMAT=tsv: pandas' to_csv
    with tabs, every cell quoted, no index column."""
    pd = pytest.importorskip("pandas")
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)


def _vlmevalkit_rows(questions, table, with_subset: bool) -> list[dict]:
    by_id = {q["question_id"]: q for q in questions}
    out = []
    for i, row in enumerate(table.to_pylist()):
        q = by_id[row["question_id"]]
        text = row["answer"] if row["answer"] is not None else row["raw_answer"]
        entry = {
            "index": row["question_id"] if not with_subset else i,
            "question": q["question"],
            "answer": q["answers"][0],
            "category": q["question_type"],
        }
        if with_subset:
            entry |= {
                "question_id": row["question_id"],
                "perturbation": row["perturbation"],
                "modality": row["modality"],
                "severity": row["severity"],
            }
        out.append(entry | {"prediction": text})
    return out


def test_vlmevalkit_predictions_import_to_the_same_tables(study, tmp_path):
    """Per-subset files named ``<model>_<dataset>.tsv`` with ``index`` = question id, and
    one file whose rows carry question_id, perturbation and severity."""
    questions, predictions, _, _, _ = study
    folder = tmp_path / "vlmevalkit"
    folder.mkdir()
    for subset, table in predictions.items():
        name = f"Qwen2-VL-2B_{task_name(subset[1], subset[2])}.tsv"
        _write_vlmevalkit(folder / name, _vlmevalkit_rows(questions, table, False))
    raw = {s: t.set_column(2, "raw_answer", _answer_or_blank(t)) for s, t in predictions.items()}
    tables, counts = import_answers(read_vlmevalkit(folder), _targets(questions), MODEL)
    assert all(t.equals(raw[s]) for t, s in zip(tables, SUBSETS, strict=True))
    one = tmp_path / "all.tsv"
    rows = [r for t in predictions.values() for r in _vlmevalkit_rows(questions, t, True)]
    _write_vlmevalkit(one, rows)
    tables, _ = import_answers(read_vlmevalkit(one), _targets(questions), MODEL)
    assert all(t.equals(raw[s]) for t, s in zip(tables, SUBSETS, strict=True))
    assert counts.problems() == []


def _answer_or_blank(table: pa.Table) -> pa.Array:
    """VLMEvalKit keeps only the prediction: the raw reply is the text scored."""
    answers, raws = table.column("answer").to_pylist(), table.column("raw_answer").to_pylist()
    return pa.array([a if a is not None else r for a, r in zip(answers, raws, strict=True)])


def _log_paths(folder: Path) -> list[Path]:
    return sorted(lmms_eval_files(folder).values())


def _accuracy(files, questions_path) -> pl.DataFrame:
    """Accuracy per (model, perturbation, severity) over answered rows, by the package's
    scoring, in the long form the VRE suite reads."""
    preds = pl.concat([pl.read_parquet(f) for f in files]).filter(pl.col("status") == ANSWERED)
    questions = pl.read_parquet(questions_path)
    scored = score_predictions(preds, questions, "vqa_accuracy")
    return (
        scored.group_by("model", "perturbation", "severity")
        .agg(pl.col("score").mean().alias("accuracy"))
        .sort("model", "perturbation", "severity")
    )


def test_the_analyses_of_imported_answers_equal_the_workflows(study, tmp_path, easy_vqa_eval):
    """The run_model job of an imported model (import_job, on the job's Subsets) writes
    files from which accuracy, the VRE suite and every table of the DuckDB file but the
    records' own (model cards, costs, run info) equal the workflow's."""
    from vqarobust.db import DatabaseInputs, build_database
    from vqarobust.metrics.robustness import robustness_tables

    questions, predictions, files, exported, order = study
    logs = _write_lmms_eval_logs(tmp_path / "logs", questions, predictions, order)
    (logs / f"{DATE}_samples_vqav2_val.jsonl").write_text('{"doc_id": 0}\n')
    n = len(questions)
    spec = {"family": "imported", "logs": str(logs), "format": "lmms-eval"}
    spec["exported"] = str(exported)
    outputs, imported = [], []
    for file in files:
        perturbation = file.stem
        subsets = [Subset(p, s, "unused") for _, p, s in SUBSETS if p == perturbation]
        path = tmp_path / "imported" / MODEL / file.name
        outputs.append((subsets, path))
        imported.append(path)
    counts = import_job(MODEL, spec, easy_vqa_eval["questions"], outputs)
    assert counts == [pq.read_metadata(f).num_rows for f in files]
    for mine, theirs in zip(imported, files, strict=True):
        assert pq.read_table(mine).equals(pq.read_table(theirs).cast(store.PREDICTION_SCHEMA))
    record = json.loads(pq.read_schema(imported[0]).metadata[store.INPUTS_KEY])
    assert record["inputs"]["checkpoint"]["logs"]["path"] == str(logs)
    # Each output read its own tasks' logs; another benchmark's was read by none.
    assert record["import"]["other_tasks"] == {}
    assert record["import"]["unread_tasks"] == ["vqav2_val"]
    assert (record["import"]["records"], record["import"]["imported"]) == (n, n)

    ours = _accuracy(files, easy_vqa_eval["questions"])
    theirs = _accuracy(imported, easy_vqa_eval["questions"])
    assert ours.equals(theirs)
    vre_ours = robustness_tables(ours, families=FAMILIES)
    vre_theirs = robustness_tables(theirs, families=FAMILIES)
    for name in ("submetrics", "vre_model", "vre_perturbation", "vre_sweep", "vre_family"):
        assert getattr(vre_ours, name).equals(getattr(vre_theirs, name)), name
    assert vre_ours.vre_model.height == 1

    settings = {"families": FAMILIES, "on_failed_answers": "skip", "seed": 0}
    built = {}
    for label, paths in (("workflow", files), ("imported", imported)):
        db = tmp_path / f"{label}.duckdb"
        build_database(db, DatabaseInputs(easy_vqa_eval["questions"], paths), **settings)
        built[label] = db
    _assert_same_tables(built["workflow"], built["imported"])
    import duckdb

    # What the import cannot know: the costs are unknown, the card names the logs.
    with duckdb.connect(str(built["imported"]), read_only=True) as con:
        assert con.sql("SELECT DISTINCT known FROM costs").fetchall() == [(False,)]
        card = con.sql("SELECT family, checkpoint, parameters FROM model_cards").fetchall()
    assert card == [("imported", f"{logs} (sha256 {logs_sha256(_log_paths(logs))[:12]})", None)]


# Tables that describe the prediction files' records, not the answers.
RECORD_TABLES = {"model_cards", "model_loads", "costs", "run_info", "cost_summary"}


def _assert_same_tables(a: Path, b: Path) -> None:
    import duckdb

    with duckdb.connect(str(a), read_only=True) as ca, duckdb.connect(str(b), read_only=True) as cb:
        names = sorted(
            r[0] for r in ca.sql("SELECT table_name FROM information_schema.tables").fetchall()
        )
        assert "vre" in names or any("vre" in n for n in names)
        compared = 0
        for name in names:
            if name in RECORD_TABLES:
                continue
            left = ca.sql(f'SELECT * FROM "{name}" ORDER BY ALL').pl()
            right = cb.sql(f'SELECT * FROM "{name}" ORDER BY ALL').pl()
            assert left.equals(right), name
            compared += 1
        assert compared >= 10


# -- scoring: lmms-eval's VQAv2 metric and the official one ------------------------------

TEN = 10


@pytest.mark.parametrize(
    ("prediction", "answers", "official", "lmms"),
    [
        # Agreeing humans, a plain match: both take the mean over the ten leave-one-out
        # subsets of min(matches / 3, 1): 2 matches give (2 x 1/3 + 8 x 2/3) / 10 = 0.6.
        ("red", ["red"] * 2 + ["blue"] * 8, 0.6, 0.6),
        ("Red.", ["red"] * 3 + ["blue"] * 7, 0.9, 0.9),
        # All ten say "two": the official code leaves unanimous answers unnormalized, so
        # the prediction (normalized to "2") matches none; lmms-eval normalizes both.
        ("two", ["two"] * TEN, 0.0, 1.0),
        ("2", ["two"] * TEN, 0.0, 1.0),
        # Disagreeing humans get only the punctuation step officially: "Two" keeps its
        # capital and matches nothing; lmms-eval lowercases it: 3 matches give 0.9.
        ("2", ["Two"] * 3 + ["three"] * 7, 0.0, 0.9),
        # lmms-eval finds a digit-comma-digit group with one or more commas, the official
        # regex with exactly one: "1,,000" loses its commas there ("1000"), becomes
        # "1 000" here.
        ("1,,000", ["1000"] * TEN, 0.0, 1.0),
    ],
)
def test_lmms_eval_and_official_scores_by_hand(prediction, answers, official, lmms):
    assert vqa_accuracy(prediction, answers) == pytest.approx(official)
    assert lmms_eval_vqav2(prediction, _lmms_answers(answers)) == pytest.approx(lmms)


def test_lmms_eval_equals_the_both_normalization_on_vqav2_rows():
    """With VQAv2's answer dicts (distinct answer_id) lmms-eval's score is this
    package's ``vqa_accuracy_both`` (scoring.metric: vqa_accuracy_both), except for
    the comma regex; and the leave-one-out average differs from Eq. 2 as printed."""
    cases = [
        ("red", ["red"] * 2 + ["blue"] * 8),
        ("two", ["two"] * TEN),
        ("2", ["Two"] * 3 + ["three"] * 7),
        ("a dog", ["dog"] * 4 + ["cat"] * 6),
        ("yes", ["yes"] * TEN),
        ("no", ["yes"] * TEN),
    ]
    for prediction, answers in cases:
        lmms = lmms_eval_vqav2(prediction, _lmms_answers(answers))
        assert lmms == pytest.approx(vqa_accuracy_both(prediction, answers)), prediction
    # min(#match/3, 1) once over all ten (Eq. 2) vs averaged over the 10 leave-one-out
    # subsets: 2 matches give 2/3 vs 0.6, 3 give 1 vs 0.9, 4 or more 1 either way.
    assert vqa_accuracy_plain("red", ["red"] * 2 + ["blue"] * 8) == pytest.approx(2 / 3)
    assert vqa_accuracy_plain("red", ["red"] * 3 + ["blue"] * 7) == 1.0
    assert vqa_accuracy("red", ["red"] * 4 + ["blue"] * 6) == 1.0


def test_lmms_eval_leave_one_out_needs_distinct_answer_dicts():
    """lmms-eval leaves out every human answer *equal as a dict* to the one left out:
    with VQAv2's distinct answer_id that is one answer; answers without ids (or
    repeated ids) leave out all equal answers at once, and the score drops."""
    answers = ["red"] * 2 + ["blue"] * 8
    without_ids = [{"answer": a} for a in answers]
    # Leaving out a "red" leaves 0 reds; leaving out a "blue" leaves 2: 8 x 2/3 / 10.
    assert lmms_eval_vqav2("red", without_ids) == pytest.approx(8 * (2 / 3) / 10)
    assert lmms_eval_vqav2("red", _lmms_answers(answers)) == pytest.approx(0.6)


# -- the imported family in a study -------------------------------------------------------


def _tiny_config(**entry) -> dict:
    from tests.conftest import REPO

    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    config["models"]["mine"] = {"family": "imported", **entry}
    return config


def test_an_imported_model_is_a_study_model_whose_logs_are_job_inputs(tmp_path):
    """Its run_model job (a model's every subset, as for any model) takes each log file
    and the export's card and data files as inputs, asks for no GPU, and its answers'
    params hold the entry; it gets no attention job."""
    from types import SimpleNamespace

    from vqarobust.config import validate_config
    from vqarobust.plan import StudyPlan

    logs = tmp_path / "logs" / "org__model"
    logs.mkdir(parents=True)
    for date in ("20260101_000000", "20260102_000000"):
        (logs / f"{date}_samples_vqarobust_clean_0.jsonl").write_text("{}\n")
    (logs / "20260101_000000_samples_vqarobust_brightness_1.jsonl").write_text("{}\n")
    exported = tmp_path / "exported"
    (exported / "data" / "clean-0").mkdir(parents=True)
    (exported / "README.md").write_text("---\nconfigs: []\n---\n")
    (exported / "data" / "clean-0" / "test.parquet").write_text("1")
    config = validate_config(_tiny_config(logs=str(tmp_path / "logs"), exported=str(exported)))
    assert config["models"]["mine"]["device"] == "cpu"
    plan = StudyPlan.build(config)
    wildcards = SimpleNamespace(dataset=plan.dataset, model="mine")
    inputs = plan.infer.job_input(wildcards)
    assert inputs["logs"] == [
        str(logs / "20260101_000000_samples_vqarobust_brightness_1.jsonl"),
        str(logs / "20260102_000000_samples_vqarobust_clean_0.jsonl"),
        str(exported / "README.md"),
        str(exported / "data" / "clean-0" / "test.parquet"),
    ]
    assert "logs" not in plan.infer.job_input(
        SimpleNamespace(dataset=plan.dataset, model="cnn-bow")
    )
    assert plan.models.model_gpus(wildcards) == 0
    assert plan.models.model_spec(wildcards)["logs"] == str(tmp_path / "logs")
    assert "mine" not in plan.infer.attention_models


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "models.mine: family imported needs logs"),
        ({"logs": "absent"}, "models.mine.logs: lmms-eval logs: no folder"),
        ({"logs": "LOGS", "format": "vlmevalkit"}, "models.mine.logs: VLMEvalKit predictions"),
        ({"logs": "LOGS", "format": "csv"}, "models.mine.format"),
        ({"logs": "LOGS", "path_or_id": "x"}, "not imported; family imported reads"),
        ({"logs": "LOGS", "device": "cuda"}, "models.mine.device"),
        ({"logs": "LOGS", "exported": "absent"}, "models.mine.exported"),
    ],
)
def test_a_wrong_imported_entry_fails_validation_naming_its_key(tmp_path, entry, message):
    from vqarobust.config import ConfigError, validate_config

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "20260101_000000_samples_vqarobust_clean_0.jsonl").write_text("{}\n")
    entry = {k: str(logs) if v == "LOGS" else v for k, v in entry.items()}
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(_tiny_config(**entry))
    # logs is the imported family's key alone.
    with pytest.raises(ConfigError, match=r"models.cnn-bow.logs: applies to family imported"):
        config = _tiny_config(logs=str(logs))
        config["models"]["cnn-bow"]["logs"] = str(logs)
        validate_config(config)


def test_lmms_eval_is_the_both_normalization_but_for_repeated_commas():
    """Over random predictions and ten human answers drawn from strings that exercise
    every normalization step (numbers, articles, case, punctuation, contractions,
    periods, digit groups), lmms-eval's score equals ``vqa_accuracy_both`` everywhere
    and the official score often differs; with "1,,000" among them, only lmms-eval
    joins its digits."""
    import random

    words = ["two", "2", "Two", "the dog", "dog", "Dog.", "1,000", "1000", "yes", "Yes!"]
    words += ["no", "isnt", "isn't", "a red-car", "red car", "3.5", "3.5.", "left/right"]
    words += ["left right", "none", "0"]
    rng = random.Random(0)
    official_differs = 0
    for _ in range(2000):
        prediction, answers = rng.choice(words), [rng.choice(words) for _ in range(10)]
        lmms = lmms_eval_vqav2(prediction, _lmms_answers(answers))
        assert lmms == pytest.approx(vqa_accuracy_both(prediction, answers)), (prediction, answers)
        official_differs += lmms != pytest.approx(vqa_accuracy(prediction, answers))
    assert official_differs > 100
    answers = ["1,,000"] * 3 + ["dog"] * 7
    assert lmms_eval_vqav2("1000", _lmms_answers(answers)) == pytest.approx(0.9)
    assert vqa_accuracy_both("1000", answers) == 0.0


def test_logs_of_two_models_are_refused(tmp_path):
    """lmms-eval writes a folder per model under --output_path: ``logs`` names one."""
    for model in ("org__a", "org__b"):
        (tmp_path / model).mkdir()
        (tmp_path / model / f"{DATE}_samples_vqarobust_clean_0.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="lmms-eval logs of several models"):
        lmms_eval_files(tmp_path)
    assert list(lmms_eval_files(tmp_path / "org__a")) == ["vqarobust_clean_0"]
