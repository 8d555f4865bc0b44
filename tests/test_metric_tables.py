import polars as pl
import pytest

from vqarobust.cli import main
from vqarobust.metrics.tables import TableError, read_accuracy_table, validate_accuracy_table

GOOD = """model,perturbation,severity,accuracy
a,clean,0,0.8
a,snow,1,0.7
a,snow,2,0.6
b,snow,0,0.7
b,snow,1,0.65
b,snow,2,0.6
"""


def test_clean_rows_once_per_model_or_per_corruption(tmp_path):
    path = tmp_path / "acc.csv"
    path.write_text(GOOD)
    t = read_accuracy_table(path)
    clean = t.filter(pl.col("severity") == 0)
    assert clean.sort("model")["perturbation"].to_list() == ["clean", "clean"]
    assert clean.sort("model")["accuracy"].to_list() == [0.8, 0.7]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,perturbation,severity\na,snow,1\n", "missing columns"),
        (GOOD + "a,snow,3,1.2\n", r"accuracy outside \[0, 1\]"),
        (GOOD + "a,snow,1,0.5\n", "duplicate rows that disagree"),
        (GOOD + "c,snow,1,0.5\n", r"no clean accuracy .* \['c'\]"),
        (GOOD + "a,blur,0,0.5\n", "clean accuracies disagree"),
        (GOOD + "a,snow,7,0.5\n", "severity outside 0..5"),
    ],
)
def test_errors_show_the_offending_rows(text, message):
    df = pl.read_csv(text.encode())
    with pytest.raises(TableError, match=message):
        validate_accuracy_table(df)


def test_agreeing_duplicates_are_dropped():
    df = pl.read_csv((GOOD + "a,snow,1,0.7\n").encode())
    assert validate_accuracy_table(df).height == 6


def test_cli_writes_every_table(tmp_path, capsys):
    path = tmp_path / "acc.parquet"
    pl.read_csv(GOOD.encode()).write_parquet(path)
    out = tmp_path / "out"
    assert (
        main(
            [
                "metrics",
                str(path),
                "--out",
                str(out),
                "--weights",
                "first_drop=0.6",
                "range_of_error=0.1",
                "error_rate=0.1",
                "average_error=0.1",
                "corruption_error_diff=0.1",
            ]
        )
        == 0
    )
    for name in ("submetrics", "vre_model", "vre_perturbation", "mmi", "accuracy"):
        assert (out / f"{name}.csv").exists()
    assert "VRE per model" in capsys.readouterr().out
    vre = pl.read_csv(out / "vre_model.csv")
    assert set(vre.columns) >= {"model", "vre", "first_drop", "relative_drop"}


def test_cli_reports_bad_tables_and_weights(tmp_path, capsys):
    path = tmp_path / "acc.csv"
    path.write_text(GOOD + "a,snow,1,0.5\n")
    assert main(["metrics", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "disagree" in capsys.readouterr().err
    path.write_text(GOOD)
    assert (
        main(["metrics", str(path), "--out", str(tmp_path / "o"), "--weights", "first_drop=1"]) == 2
    )
    assert "weights must name exactly" in capsys.readouterr().err
