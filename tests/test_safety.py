"""What a config, a checkpoint or a DuckDB file cannot make the workflow do (issue 63):
run a checkpoint's code in the scheduler, load pickled weights unasked, reach the Hub
when no entry allows downloads, send an API key where it should not go, inject SQL
through a table name, or a formula into a spreadsheet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

TINY = REPO / "tests" / "data" / "tiny_config.yaml"


# --- No code from a checkpoint in the scheduler ------------------------------------------


def code_checkpoint(folder: Path, marker: Path, model_type: str = "evil_vlm") -> Path:
    """A checkpoint folder whose config class is its own code (``auto_map``), which writes
    ``marker`` when imported."""
    folder.mkdir(parents=True)
    auto_map = {
        "AutoConfig": "configuration_evil.EvilConfig",
        "AutoModelForImageTextToText": "configuration_evil.EvilModel",
    }
    config = {"model_type": model_type, "auto_map": auto_map}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_evil.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('checkpoint code ran')\n"
        "from transformers import PretrainedConfig\n\n\n"
        "class EvilConfig(PretrainedConfig):\n"
        f"    model_type = {model_type!r}\n"
    )
    return folder


def _remote_entry(folder: Path) -> dict:
    return {
        "family": "image-text-to-text",
        "path_or_id": str(folder),
        "trust_remote_code": True,
        "gpu_memory_gb": "auto",
    }


GPU_MEMORY_ERROR = (
    "config error at models.remote.gpu_memory_gb: auto estimates the memory in the "
    "scheduler, which runs no code of a checkpoint"
)


def test_planning_an_auto_estimate_of_remote_code_runs_none_and_names_the_key(tmp_path):
    from vqarobust.config import ConfigError, validate_config
    from vqarobust.plan import StudyPlan

    marker = tmp_path / "ran.txt"
    folder = code_checkpoint(tmp_path / "remote", marker)
    config = yaml.safe_load(TINY.read_text())
    config["models"]["remote"] = _remote_entry(folder)
    validate_config(config)
    with pytest.raises(ConfigError) as raised:
        StudyPlan.build(config)
    message = str(raised.value)
    assert message.startswith(GPU_MEMORY_ERROR)
    assert "model_type 'evil_vlm' is not one transformers knows" in message
    assert message.endswith("set models.remote.gpu_memory_gb to a number of GB")
    assert not marker.exists()
    # A number plans; the checkpoint's code still never runs.
    config["models"]["remote"]["gpu_memory_gb"] = 24
    plan = StudyPlan.build(config)
    assert plan.models.model_gpu_memory(type("W", (), {"model": "remote"})) == 24
    assert not marker.exists()
    # The control: transformers told to trust it runs it (so the checks above can fail).
    from transformers import AutoConfig

    AutoConfig.from_pretrained(str(folder), trust_remote_code=True)
    assert marker.read_text() == "checkpoint code ran"


def test_a_dry_run_of_an_auto_estimate_of_remote_code_runs_none(tmp_path):
    """``snakemake -n``: the config error alone, no traceback, the file never written."""
    marker = tmp_path / "ran.txt"
    folder = code_checkpoint(tmp_path / "remote", marker)
    config = yaml.safe_load(TINY.read_text())
    config["models"]["remote"] = _remote_entry(folder)
    workdir = tmp_path / "work"
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "1",
        "-n",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert GPU_MEMORY_ERROR in out and "set models.remote.gpu_memory_gb to a number" in out, out
    assert "Traceback" not in out
    assert not marker.exists()


def test_auto_map_needs_remote_code_only_when_the_entry_trusts_it(tmp_path):
    """A known model_type with auto_map: transformers' class is what a job loads without
    trust_remote_code (estimable), the checkpoint's own with it (not)."""
    from vqarobust.models.memory import remote_code_reason

    marker = tmp_path / "ran.txt"
    folder = code_checkpoint(tmp_path / "known", marker, model_type="qwen2_vl")
    assert remote_code_reason(str(folder), trust_remote_code=False) is None
    assert remote_code_reason(str(folder), trust_remote_code=True) == (
        "its config.json names code of its own (auto_map) and trust_remote_code is true"
    )
    config = json.loads((folder / "config.json").read_text())
    del config["auto_map"]
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": []}}))
    assert remote_code_reason(str(folder), trust_remote_code=True) == (
        "its tokenizer_config.json names code of its own (auto_map) and trust_remote_code is true"
    )
    assert not marker.exists()


# --- Identifiers quoted in SQL built from names --------------------------------------------

# A table name with a quote and a space, and one that would end the statement if pasted.
ODD_NAMES = ('scores of "model" a', 'x"; DROP TABLE kept; --')


def test_identifiers_are_quoted_with_inner_quotes_doubled():
    from vqarobust.sql import identifier, literal

    assert identifier('a"b c') == '"a""b c"'
    assert identifier("plain") == '"plain"'
    assert literal("it's") == "'it''s'"


def _results_file(path: Path, rows: dict[str, list[int]]) -> Path:
    import duckdb

    from vqarobust.provenance import PREFIX

    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
        con.execute("INSERT INTO run_info VALUES (?, '1')", [f"{PREFIX}seed"])
        con.execute("CREATE TABLE kept (v INTEGER)")
        for name, values in rows.items():
            quoted = '"' + name.replace('"', '""') + '"'
            con.execute(f"CREATE TABLE {quoted} (v INTEGER)")
            con.executemany(f"INSERT INTO {quoted} VALUES (?)", [[v] for v in values])
    return path


def test_provenance_diff_reads_tables_whose_names_hold_quotes_and_spaces(tmp_path):
    import duckdb

    from vqarobust.provenance import diff

    a = _results_file(tmp_path / "a.duckdb", {ODD_NAMES[0]: [1, 2], ODD_NAMES[1]: [5]})
    b = _results_file(tmp_path / "b.duckdb", {ODD_NAMES[0]: [1, 3, 4], ODD_NAMES[1]: [5]})
    result = diff(a, b)
    assert result["tables"] == {ODD_NAMES[0]: "2 vs 3 rows; 1 rows only in A, 2 only in B"}
    assert result["only_in_a"] == result["only_in_b"] == []
    with duckdb.connect(str(a), read_only=True) as con:  # the pasted SQL never ran
        assert con.execute("SELECT count(*) FROM kept").fetchone() == (0,)


def test_the_results_file_takes_tables_whose_names_hold_quotes_and_spaces(tmp_path):
    """assemble_database names each table after its Parquet file."""
    import duckdb
    import polars as pl

    from vqarobust.analyses.assemble import assemble_database
    from vqarobust.analyses.base import MANIFEST

    folder = tmp_path / "tables"
    folder.mkdir()
    for i, name in enumerate(ODD_NAMES):
        pl.DataFrame({"v": [i, i + 1]}).write_parquet(folder / f"{name}.parquet")
    # The view over accuracy that every results file has.
    accuracy = {
        "model": ["m"],
        "modality": ["clean"],
        "perturbation": ["clean"],
        "severity": [0],
        "n": [1],
        "accuracy": [1.0],
    }
    pl.DataFrame(accuracy).write_parquet(folder / "accuracy.parquet")
    (folder / MANIFEST).write_text(json.dumps({"info": {}, "warnings": []}))
    db = tmp_path / "results.duckdb"
    counts = assemble_database(db, [folder], {}, [], seed=0, config=None)
    assert counts[ODD_NAMES[0]] == 2 and counts[ODD_NAMES[1]] == 2
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute('SELECT sum(v) FROM "scores of ""model"" a"').fetchone() == (1,)


# --- CSV cells a spreadsheet would run --------------------------------------------------

FORMULAS = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
HARMLESS = ["yes", "a=b", "two - three", " =padded", ""]


def test_text_cells_that_start_a_formula_get_a_quote_and_numbers_stay():
    import polars as pl

    from vqarobust.spreadsheets import escape_formulas

    frame = pl.DataFrame(
        {
            "text": [*FORMULAS, *HARMLESS, None],
            "number": [-1.5, 2.0, -3.0, 4.0, 5.0, 6.0, -7.0, 8.0, 9.0, 10.0, 11.0, None],
            "count": list(range(-6, 6)),
            "kind": pl.Series(["-a", "b"] * 6, dtype=pl.Categorical),
        }
    )
    out = escape_formulas(frame)
    assert out["text"].to_list() == [*("'" + f for f in FORMULAS), *HARMLESS, None]
    assert out["kind"].to_list() == ["'-a", "b"] * 6
    assert out["number"].equals(frame["number"]) and out["count"].equals(frame["count"])


def test_the_per_sample_export_escapes_a_reply_that_starts_a_formula(tmp_path):
    """export_records' CSV: a generative model's raw reply ``=cmd|...`` and a question
    ``-1 ...`` are text in a spreadsheet; the numeric score and severity are unchanged;
    Parquet keeps the text as it was."""
    import polars as pl

    from vqarobust.export import export_records

    records = pl.DataFrame(
        {
            "model": ["m", "m"],
            "severity": [-1, 2],
            "question": ["-1 or 1?", "what?"],
            "answers": [["1"], ["2"]],
            "raw_prediction": ["=cmd|' /C calc'!A0", "@two"],
            "prediction": ["=cmd", "two"],
            "score": [-0.5, 1.0],
        }
    )
    csv = export_records(records, tmp_path / "r.csv", "csv").read_text().splitlines()
    assert csv[1] == 'm,-1,\'-1 or 1?,"[""1""]",\'=cmd|\' /C calc\'!A0,\'=cmd,-0.5'
    assert csv[2] == 'm,2,what?,"[""2""]",\'@two,two,1.0'
    parquet = pl.read_parquet(export_records(records, tmp_path / "r.parquet", "parquet"))
    assert parquet.equals(records)


def test_the_metrics_tables_escape_a_model_name_that_starts_a_formula(tmp_path):
    """``vqarobust metrics`` writes a user's model names into its CSV tables."""
    import polars as pl

    from vqarobust.metrics.tables import write_metric_tables

    rows = [(m, "clean", 0, 0.9) for m in ("=evil()", "ok")]
    rows += [(m, "blur", s, 0.8 - 0.05 * s) for m in ("=evil()", "ok") for s in range(1, 6)]
    table = pl.DataFrame(
        rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row"
    )
    write_metric_tables(table, tmp_path)
    vre = pl.read_csv(tmp_path / "vre_model.csv")
    assert sorted(vre["model"]) == ["'=evil()", "ok"]
    accuracy = pl.read_csv(tmp_path / "accuracy.csv")
    assert accuracy.filter(pl.col("model") == "ok")["accuracy"].to_list()[:2] == [0.9, 0.75]


# --- Served models: where the key goes --------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "api_key_env"),
    [
        ("http://127.0.0.1:8000/v1", "VLLM_API_KEY"),
        ("http://127.3.4.5/v1", "API_KEY"),
        ("http://[::1]:8000/v1", "OPENAI_API_KEY"),
        ("http://LOCALHOST:8000/v1", "MY_API_KEY"),
        ("https://api.example.org/v1", "OPENAI_API_KEY"),
        ("http://gpu-node:8000/v1", None),  # no key: plain http anywhere
    ],
)
def test_an_endpoint_that_leaks_no_secret_passes(base_url, api_key_env):
    from vqarobust.models.endpoint import check_endpoint

    check_endpoint("served", base_url, api_key_env)


SECRET = "sk-secret-123"


@pytest.mark.parametrize(
    ("base_url", "api_key_env", "key", "message"),
    [
        ("https://api.example.org/v1", "HF_TOKEN", "api_key_env", "'HF_TOKEN' is not named like"),
        ("https://api.example.org/v1", "AWS_SECRET_ACCESS_KEY", "api_key_env", "not named like"),
        ("https://api.example.org/v1", "PATH", "api_key_env", "'PATH' is not named like"),
        ("https://api.example.org/v1", "openai_api_key", "api_key_env", "in upper case"),
        ("http://gpu-node:8000/v1", "VLLM_API_KEY", "base_url", "over plain http to gpu-node"),
        ("http://10.0.0.1/v1", "VLLM_API_KEY", "base_url", "to 10.0.0.1, which is not this"),
        ("http://localhost.evil.org/v1", "VLLM_API_KEY", "base_url", "over plain http"),
        (f"https://user:{SECRET}@api.example.org/v1", None, "base_url", "(user:password@)"),
        (f"https://{SECRET}@api.example.org/v1", None, "base_url", "credentials before its"),
        (f"https://api.example.org/v1?api_key={SECRET}", None, "base_url", "(parameter 'api_key')"),
        (f"https://api.example.org/v1?x=1&Token={SECRET}", None, "base_url", "(parameter 'Token')"),
        (f"https://api.example.org/v1?v={SECRET}", None, "base_url", "holds a query string;"),
        (f"https://api.example.org/v1#{SECRET}", None, "base_url", "holds a fragment"),
        ("ftp://api.example.org/v1", None, "base_url", "must start with http:// or https://"),
        ("https://api.example.org:99999/v1", None, "base_url", "port that is not a number"),
    ],
)
def test_an_endpoint_that_would_leak_a_secret_is_refused_naming_the_key(
    base_url, api_key_env, key, message
):
    from vqarobust.models.endpoint import EndpointError, check_endpoint

    with pytest.raises(EndpointError) as raised:
        check_endpoint("served", base_url, api_key_env)
    assert str(raised.value).startswith(f"models.served.{key}: ")
    assert raised.value.key == key
    assert message in str(raised.value)
    assert SECRET not in str(raised.value)


def test_the_config_validation_refuses_an_endpoint_without_echoing_the_secret():
    from vqarobust.config import ConfigError, validate_config

    config = yaml.safe_load(TINY.read_text())
    served = {"family": "openai-chat", "model": "llava", "api_key_env": "VLLM_API_KEY"}
    for url, key in (
        ("http://gpu-node:8000/v1", "base_url"),
        (f"https://api.example.org/v1?key={SECRET}", "base_url"),
    ):
        config["models"] = {"served": {**served, "base_url": url}}
        with pytest.raises(ConfigError) as raised:
            validate_config(config)
        assert str(raised.value).startswith(f"config error at models.served.{key}: ")
        assert SECRET not in str(raised.value)
    config["models"] = {
        "served": {**served, "base_url": "https://x.org/v1", "api_key_env": "HF_TOKEN"}
    }
    with pytest.raises(
        ConfigError, match=r"^config error at models.served.api_key_env: 'HF_TOKEN'"
    ):
        validate_config(config)
    config["models"] = {"served": {**served, "base_url": "http://127.0.0.1:8000/v1"}}
    validate_config(config)


def test_the_endpoint_host_is_the_url_without_credentials_in_one_spelling():
    from vqarobust.models.endpoint import endpoint_host

    assert endpoint_host("http://Node/v1/") == "http://node:80/v1"
    assert endpoint_host("http://node:80/v1") == "http://node:80/v1"
    assert endpoint_host("https://api.example.org/v1") == "https://api.example.org:443/v1"
    assert endpoint_host(f"https://u:{SECRET}@h.org:8443/v1?key={SECRET}#x") == (
        "https://h.org:8443/v1"
    )
    assert endpoint_host("http://[::1]:8000/v1") == "http://[::1]:8000/v1"


# --- Safetensors by default -----------------------------------------------------------------


class Payload:
    """What a pickled checkpoint can hold: code that unpickling runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "unpickled"))


def pickled_copy(source: Path, folder: Path) -> Path:
    """The checkpoint ``source`` with its weights as a pickled ``pytorch_model.bin`` only
    (transformers 5's save_pretrained writes safetensors alone; this is the file older
    ones wrote with ``safe_serialization=False``)."""
    import shutil

    import torch
    from safetensors.torch import load_file

    shutil.copytree(source, folder)
    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    return folder


@pytest.fixture(scope="module")
def blip_checkpoints(tmp_path_factory):
    from tests.tiny_checkpoints import tiny_blip

    root = tmp_path_factory.mktemp("safetensors")
    safe = tiny_blip(root / "safe")
    return safe, pickled_copy(safe, root / "pickled")


def test_pickled_weights_are_refused_by_default_and_load_with_the_opt_out(blip_checkpoints):
    from tests.tiny_checkpoints import random_images
    from vqarobust.models import load_model
    from vqarobust.models.loading import UnsafeWeightsError

    safe, pickled = blip_checkpoints
    entry = {"family": "blip", "path_or_id": str(pickled), "max_new_tokens": 3}
    with pytest.raises(UnsafeWeightsError) as raised:
        load_model(entry, name="blip-bin")
    assert str(raised.value) == (
        f"model 'blip-bin': {pickled} holds only pickled weights (pytorch_model.bin); pickled "
        "weights can run code when they load, so only safetensors load by default. Convert "
        "them (load and save_pretrained(safe_serialization=True) on a machine you trust), or "
        "set use_safetensors: false in the model's entry to load them (docs/models.md)"
    )
    opted = load_model({**entry, "use_safetensors": False}, name="blip-bin")
    reference = load_model({**entry, "path_or_id": str(safe)}, name="blip")
    images, questions = random_images(2), ["what color?", "is there a dog?"]
    assert opted.respond_all(images, questions) == reference.respond_all(images, questions)
    assert opted.use_safetensors is False and reference.use_safetensors is True


def test_a_pickle_that_runs_code_is_never_opened_by_default(blip_checkpoints, tmp_path):
    import torch

    from vqarobust.models import load_model
    from vqarobust.models.loading import UnsafeWeightsError

    evil = pickled_copy(blip_checkpoints[0], tmp_path / "evil")
    marker = tmp_path / "ran.txt"
    torch.save({"payload": Payload(marker)}, evil / "pytorch_model.bin")
    with pytest.raises(UnsafeWeightsError):
        load_model({"family": "blip", "path_or_id": str(evil)}, name="evil")
    assert not marker.exists()
    # The control: unpickling the file as plain pickle runs its code.
    torch.load(evil / "pytorch_model.bin", weights_only=False)
    assert marker.read_text() == "unpickled"


def test_check_safetensors_accepts_a_sharded_index_and_names_what_it_found(tmp_path):
    from vqarobust.models.loading import UnsafeWeightsError, check_safetensors

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(UnsafeWeightsError, match=r"holds no safetensors weights; pickled"):
        check_safetensors("m", str(folder))
    check_safetensors("m", str(folder), use_safetensors=False)
    (folder / "pytorch_model.bin.index.json").write_text("{}")
    with pytest.raises(UnsafeWeightsError, match=r"only pickled weights \(pytorch_model.bin"):
        check_safetensors("m", str(folder))
    (folder / "model.safetensors.index.json").write_text("{}")
    check_safetensors("m", str(folder))


def test_use_safetensors_is_part_of_the_fingerprint_and_not_for_served_models():
    """The key changes which files load: it reaches the model's spec (its jobs' params
    and its chunks' key), not the runtime channel; a served entry refuses it."""
    from vqarobust.config import ConfigError, validate_config
    from vqarobust.params import answer_spec, runtime_options

    entry = {"family": "blip", "path_or_id": "org/blip", "use_safetensors": False}
    assert answer_spec(entry)["use_safetensors"] is False
    assert "use_safetensors" not in runtime_options(entry)
    assert answer_spec(entry) != answer_spec({**entry, "use_safetensors": True})
    config = yaml.safe_load(TINY.read_text())
    config["models"] = {
        "served": {
            "family": "openai-chat",
            "model": "m",
            "use_safetensors": False,
            "base_url": "http://127.0.0.1:8000/v1",
        }
    }
    message = r"models.served.use_safetensors: applies to family blip or .* only, not openai-chat"
    with pytest.raises(ConfigError, match=message):
        validate_config(config)


# --- Offline unless a job's own settings allow downloads --------------------------------------

OFFLINE_PROBE = """
import json, os, sys
# Imported before the job starts, as a script's imports may do.
from huggingface_hub import constants, hf_hub_download
from vqarobust.jobs import start_job

start_job(sys.argv[1], allow_download=sys.argv[2] == "1")
try:
    hf_hub_download("org/never-cached", "config.json")
    error = None
except Exception as exc:
    error = type(exc).__name__
print(json.dumps({"env": [os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")],
                  "flag": constants.is_offline_mode(), "error": error}))
"""


class CountingHub:
    """A TCP port on 127.0.0.1 standing in for the Hub: it counts the connections made
    to it and closes each at once."""

    def __enter__(self) -> CountingHub:
        import socket
        import threading

        self.connections = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def __exit__(self, *exc: object) -> None:
        self._socket.close()


def _probe(tmp_path: Path, allow: bool) -> tuple[dict, int]:
    """The probe's findings, and the connections it made to the stand-in Hub."""
    import os

    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    with CountingHub() as hub:
        env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(REPO / "src"))
        proc = subprocess.run(
            [sys.executable, "-c", OFFLINE_PROBE, str(tmp_path / "job.log"), "1" if allow else "0"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), hub.connections


def test_a_job_runs_offline_unless_its_settings_allow_downloads(tmp_path):
    """start_job in a process that imported huggingface_hub first: offline, the Hub is
    never contacted; with allow_download it is (the stand-in refuses, the download fails)."""
    offline, contacts = _probe(tmp_path, allow=False)
    assert offline["env"] == ["1", "1"] and offline["flag"] is True and contacts == 0
    assert offline["error"] == "LocalEntryNotFoundError"
    assert "offline: no setting of this job allows downloads" in (tmp_path / "job.log").read_text()
    online, contacts = _probe(tmp_path, allow=True)
    assert online["env"] == [None, None] and online["flag"] is False and contacts >= 1
    assert online["error"] is not None


@pytest.mark.workflow
def test_a_workflow_job_is_offline_in_its_own_process_unless_its_dataset_downloads(tmp_path):
    """prepare_dataset of a hub-layout dataset, run by Snakemake: offline by default, and
    allowed to download with dataset.download (the job's own param, so a cluster job
    gets the same)."""
    from tests.hf_data import SPLIT, vqav2_rows, write_saved
    from vqarobust.datasets.miniature import write_mini_vqav2

    mini = write_mini_vqav2(tmp_path / "vqav2", n_images=3)
    saved = write_saved(vqav2_rows(mini), tmp_path / "saved")
    served = {"family": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    config = {
        "dataset": {"name": "hf-vqa", "adapter": "hf", "path": str(saved), "split": SPLIT},
        "corruptions": ["gaussian_noise"],
        "severities": [1],
        "text": {"perturbations": []},
        "basic_questions": {"rankers": []},
        "models": {"served": served},
    }
    logs = {}
    for download in (False, True):
        work = tmp_path / f"work-{download}"
        work.mkdir()
        config["dataset"]["download"] = download
        (work / "c.yaml").write_text(yaml.safe_dump(config))
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(work),
            "--configfile",
            str(work / "c.yaml"),
            "--replace-workflow-config",
            "--cores",
            "1",
            "resources/datasets/hf-vqa/eval/questions.parquet",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        logs[download] = (work / "logs" / "hf-vqa" / "prepare_dataset" / "eval.log").read_text()
    assert "offline: no setting of this job allows downloads (HF_HUB_OFFLINE=1)" in logs[False]
    assert "downloads allowed" in logs[True] and "offline" not in logs[True]
