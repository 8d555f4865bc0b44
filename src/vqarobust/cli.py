"""Command line of the vqarobust library, for use without Snakemake.

Run `vqarobust <command> --help` for a command's options."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vqarobust.logs import setup_logging

PLUGIN_HELP = (
    "a module to load as a plugin, as the config's plugins: key does "
    "(repeatable; installed plugins load anyway)"
)


def _load_plugins(args: argparse.Namespace) -> int | None:
    """Load the installed plugins and ``--plugin`` modules; 2 (printed) where one fails."""
    from vqarobust import plugins

    try:
        plugins.load(getattr(args, "plugin", None) or [])
    except plugins.PluginError as exc:
        print(exc, file=sys.stderr)
        return 2
    return None


def _corruptions(args: argparse.Namespace) -> int:
    from vqarobust.listings import corruption_rows, format_rows

    columns = ["name", "family", "severities", "benchmark", "needs", "from"]
    print(format_rows(corruption_rows(args.family), columns))
    return 0


def _listing(args: argparse.Namespace) -> int:
    from vqarobust.listings import LISTINGS, format_rows

    rows = LISTINGS[args.command]()
    print(format_rows(rows, list(rows[0]) if rows else ["name", "from"]))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from vqarobust.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(
        f"{args.config}: valid ({len(config['models'])} models, "
        f"{len(config['corruptions'])} corruptions)"
    )
    from vqarobust.config_inputs import missing_inputs

    missing = missing_inputs(config)
    label = "error" if args.strict else "warning"
    for record in missing:
        print(f"{label}: {record}", file=sys.stderr)
    if missing:
        what = "an error with --strict" if args.strict else "warnings; --strict makes them an error"
        print(f"{args.config}: {len(missing)} inputs missing ({what})", file=sys.stderr)
    return 1 if missing and args.strict else 0


def _pairs(items: list[str] | None, flag: str) -> dict[str, float] | None:
    if not items:
        return None
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{flag} takes NAME=VALUE pairs, got {item!r}")
        out[key] = float(value)
    return out


def _metrics(args: argparse.Namespace) -> int:
    import warnings

    import polars as pl

    from vqarobust.analyses import robustness
    from vqarobust.corruptions import CORRUPTIONS
    from vqarobust.metrics.intervals import uncertainty_tables
    from vqarobust.metrics.robustness import CLEAN, check_weights, softmax_weights
    from vqarobust.metrics.rscore import DEFAULT_MAXIMUM, DEFAULT_TOLERANCE
    from vqarobust.metrics.tables import (
        TableError,
        is_per_question,
        per_question_rows,
        read_accuracy_table,
        read_table,
        write_metric_tables,
    )
    from vqarobust.metrics.uncertainty import Settings

    try:
        table = read_accuracy_table(args.table)
        weights = _pairs(args.weights, "--weights")
        prefs = _pairs(args.preferences, "--preferences")
        w = check_weights(weights) if weights else softmax_weights(prefs)
        settings = Settings(
            resamples=args.resamples or 0,
            level=args.level,
            cluster=args.cluster,
            seed=args.seed,
            adjust=args.adjust,
        )
        raw = read_table(args.table)
        if args.resamples and not is_per_question(raw):
            raise TableError(
                f"{args.table}: --resamples needs one row per question "
                "(columns question_id and score, and image_id for image "
                "clusters); this is an accuracy table"
            )
        families = {
            p: CORRUPTIONS.entry(p).tags["family"]
            for p in set(table["perturbation"])
            if p in CORRUPTIONS
        }
        scored, questions = (
            per_question_rows(raw, str(args.table), args.cluster)
            if args.resamples
            else (None, None)
        )
        # The rows the workflow's robustness analysis counts (no controls, no gaps unless
        # dropped); the bootstrap sees exactly the subsets the point tables do.
        counted = robustness.Settings(
            weights=w,
            families=families,
            outside=[],
            rscore_tolerance=DEFAULT_TOLERANCE,
            rscore_maximum=DEFAULT_MAXIMUM,
            on_missing=args.on_missing,
        )
        modality = pl.when(pl.col("perturbation") == CLEAN).then(pl.lit(CLEAN))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kept, scored = robustness.counted_rows(
                table.with_columns(modality.otherwise(pl.lit("image")).alias("modality")),
                scored,
                counted,
            )
        for w_ in caught:
            print(f"warning: {w_.message}", file=sys.stderr)
    except (TableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = kept.drop("modality")
    extra = uncertainty_tables(scored, questions, settings, w, families) if args.resamples else {}
    tables = write_metric_tables(table, args.out, w, families, extra)
    with pl.Config(tbl_hide_dataframe_shape=True, float_precision=4, tbl_rows=40):
        print("weights:", ", ".join(f"{k}={v:.3f}" for k, v in w.items()))
        print("VRE per model (lower = more robust):")
        vre = tables["vre_model"].select(
            "model", "clean_accuracy", "accuracy", "relative_drop", "vre"
        )
        if extra:
            bounds = (
                extra["intervals"]
                .filter(pl.col("metric") == "vre_model")
                .select("model", pl.col("low").alias("vre_low"), pl.col("high").alias("vre_high"))
            )
            vre = vre.join(bounds, on="model", how="left")
        print(vre.sort("vre"))
        print("VRE per perturbation (higher = stronger perturbation):")
        print(
            tables["vre_perturbation"]
            .select("perturbation", "accuracy", "relative_drop", "vre")
            .sort("vre", descending=True)
        )
    print(f"wrote {', '.join(f'{n}.csv' for n in tables)} to {args.out}")
    return 0


def _preview(args: argparse.Namespace) -> int:
    from vqarobust.corruptions import needs, needs_style_weights
    from vqarobust.report.preview import write_preview

    stylize = None
    if args.stylize_weights or args.stylize_styles:
        stylize = {"weights": args.stylize_weights, "styles": args.stylize_styles}
    styled = [n for n in args.corruptions or [] if needs_style_weights(n)]
    if styled and not (stylize and all(stylize.values())):
        print(
            f"{styled[0]} needs {needs(styled[0])}: give --stylize-weights and --stylize-styles",
            file=sys.stderr,
        )
        return 2
    try:
        write_preview(
            args.image, args.out, args.corruptions, args.seed, stylize, args.images, args.id
        )
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"vqarobust preview: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


def _images_export(args: argparse.Namespace) -> int:
    from vqarobust.image_export import export_images

    try:
        n = export_images(args.images, args.out, args.ids)
    except (KeyError, FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"vqarobust images export: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    print(f"{n:,} images -> {args.out}")
    return 0


# What a missing or unreadable results file is told to do (every command that reads one).
MAKES_DATABASE = (
    "the workflow writes it as results/<dataset>/robustness.duckdb: run "
    "`snakemake` (docs/workflow.md)"
)


def database_error(path: str, command: str) -> str | None:
    """One line saying why ``path`` is not a results database that ``vqarobust command``
    can read, naming the command that makes one; None when it is one."""
    import duckdb

    from vqarobust.summary import table_names

    if not Path(path).is_file():
        return f"vqarobust {command}: no results database {path}; {MAKES_DATABASE}"
    try:
        with duckdb.connect(path, read_only=True) as con:
            tables = table_names(con)
    except duckdb.Error as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"vqarobust {command}: {path} is not a DuckDB file ({reason}); {MAKES_DATABASE}"
    if "accuracy" not in tables:
        return (
            f"vqarobust {command}: {path} is a DuckDB file but not a results database "
            f"(no table accuracy); {MAKES_DATABASE}"
        )
    return None


def _check_block(made: str, path: str) -> int:
    """CI's check of a documented block: the committed file ``path`` against ``made``
    (what this run produces); 1 with a diff when a line differs."""
    import difflib

    committed = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    diff = list(difflib.unified_diff(committed, made.splitlines(keepends=True), path, "this run"))
    if diff:
        print(f"{path} is not what this run produces:", file=sys.stderr)
        sys.stderr.writelines(diff)
        return 1
    print(f"{path}: every line is what this run produces")
    return 0


def _plan_size(args: argparse.Namespace) -> int:
    from vqarobust.metrics.sample_size import Target, plan_size, to_markdown

    if error := database_error(args.database, "plan-size"):
        print(error, file=sys.stderr)
        return 2
    try:
        target = Target(args.half_width, args.detect, args.power, args.level)
        plan = plan_size(args.database, target)
    except ValueError as exc:
        print(f"vqarobust plan-size: {exc}", file=sys.stderr)
        return 2
    command = (
        f"vqarobust plan-size {args.database} --half-width {args.half_width:g} --detect "
        f"{args.detect:g} --power {args.power:g} --level {args.level:g}"
    )
    made = to_markdown(plan, command)
    if args.check:
        return _check_block(made, args.check)
    print(made, end="")
    return 0


def _cost_estimate(args: argparse.Namespace) -> int:
    from vqarobust.config import ConfigError, load_config
    from vqarobust.cost_estimate import estimate, read_pilot, target_questions, to_markdown
    from vqarobust.plan import PlanError, StudyPlan

    try:
        pilots = {k: v for k, _, v in (p.partition("=") for p in args.model or [])}
        if any(not k or not v for k, v in pilots.items()):
            raise ValueError(f"--model takes TARGET=PILOT pairs, got {args.model}")
        plan = StudyPlan.build(load_config(args.configfile))
        unknown = sorted(set(pilots) - set(plan.model_names))
        if unknown:
            raise ValueError(f"--model names {unknown}, not models of {args.configfile}")
        pilot = read_pilot(args.pilot)
        questions = target_questions(plan, args.questions, pilot)
        per_model, cells = estimate(pilot, plan, questions[0], pilots)
    except (ConfigError, PlanError, ValueError) as exc:
        print(f"vqarobust cost-estimate: {exc}", file=sys.stderr)
        return 2
    given = [f"--questions {args.questions}"] if args.questions is not None else []
    given += [f"--model {m}" for m in args.model or []]
    command = " ".join(
        [
            "vqarobust cost-estimate --pilot",
            str(args.pilot),
            "--configfile",
            str(args.configfile),
            *given,
        ]
    )
    print(to_markdown(per_model, cells, questions, pilot, command), end="")
    return 0


def _price_gpus(args: argparse.Namespace, plan: Any, pilot_path: str | None) -> tuple:
    """gpu-hours' pricing of ``plan``: from ``pilot_path`` when given, else from
    ``args.throughput`` or the config's resources.throughput; (priced, questions, source
    lines, the options that say so)."""
    from vqarobust import gpu_hours
    from vqarobust.cost_estimate import questions_from, read_pilot
    from vqarobust.throughput import read_table

    mapping = {k: v for k, _, v in (p.partition("=") for p in args.model or [])}
    if any(not k or not v for k, v in mapping.items()):
        raise ValueError(f"--model takes TARGET=MEASURED pairs, got {args.model}")
    unknown = sorted(set(mapping) - set(plan.model_names))
    if unknown:
        raise ValueError(f"--model names {unknown}, not models of {args.configfile}")
    if pilot_path:
        pilot = read_pilot(pilot_path)
        questions = questions_from(plan, args.questions, pilot.questions_per_image, "the pilot's")
        priced = gpu_hours.from_pilot(plan, pilot, questions[0], mapping)
        return priced, questions, gpu_hours.pilot_lines(pilot), ["--pilot", str(pilot_path)]
    path = args.throughput or plan.config["resources"]["throughput"]
    if not path:
        raise ValueError(
            f"give --throughput TABLE or --pilot PILOT ({args.configfile} names no "
            "resources.throughput)"
        )
    table = read_table(path)
    questions = questions_from(plan, args.questions, table.questions_per_image, "the table's")
    priced = gpu_hours.from_table(plan, table, questions[0], mapping, args.fastest)
    given = ["--throughput", str(path)] if args.throughput else []
    given += ["--fastest"] if args.fastest else []
    return priced, questions, gpu_hours.table_lines(table, args.fastest), given


def _gpu_hours(args: argparse.Namespace) -> int:
    from vqarobust import gpu_hours
    from vqarobust.config import ConfigError, load_config
    from vqarobust.plan import PlanError, StudyPlan

    try:
        if args.gpus < 1:
            raise ValueError(f"--gpus must be at least 1, got {args.gpus}")
        plan = StudyPlan.build(load_config(args.configfile))
        priced, questions, lines, given = _price_gpus(args, plan, args.pilot)
    except (ConfigError, PlanError, ValueError) as exc:
        print(f"vqarobust gpu-hours: {exc}", file=sys.stderr)
        return 2
    given += [f"--questions {args.questions}"] if args.questions is not None else []
    given += [f"--model {m}" for m in args.model or []]
    command = " ".join(
        ["vqarobust gpu-hours --configfile", str(args.configfile), *given, "--gpus", str(args.gpus)]
    )
    made = gpu_hours.to_markdown(plan, priced, args.gpus, questions, lines, command, "--model")
    if args.check:
        return _check_block(made, args.check)
    print(made, end="")
    return 0


def _cloud_plan_command(args: argparse.Namespace, given: list[str]) -> str:
    """The command line that makes this plan, for the block's first line (the pilot is
    named once)."""
    given = [*given, *([f"--questions {args.questions}"] if args.questions is not None else [])]
    given += [f"--model {m}" for m in args.model or []]
    return " ".join(
        [
            "vqarobust cloud-plan",
            *(f"--profile {p}" for p in args.profile),
            f"--configfile {args.configfile} --pilot {args.pilot}",
            *given,
            f"--gpus {args.gpus}",
        ]
    )


def _cloud_plan(args: argparse.Namespace) -> int:
    import yaml

    from vqarobust import cloud_plan, gpu_hours
    from vqarobust.config import ConfigError, validate_config
    from vqarobust.cost_estimate import read_pilot
    from vqarobust.plan import PlanError, StudyPlan

    try:
        if args.gpus < 1:
            raise ValueError(f"--gpus must be at least 1, got {args.gpus}")
        profile = cloud_plan.read_profiles(args.profile)
        config = yaml.safe_load(Path(args.configfile).read_text()) or {}
        config.update(cloud_plan.config_overrides(profile))
        plan = StudyPlan.build(validate_config(config))
        pilot = read_pilot(args.pilot)
        workdir = cloud_plan.pilot_workdir(args.pilot)
        stored = cloud_plan.pilot_outputs(workdir)
        priced, questions, lines, given = _price_gpus(
            args, plan, None if args.throughput else args.pilot
        )
        images, asked = cloud_plan.scales(plan, pilot, questions[0])
        jobs = cloud_plan.dry_run(args.snakefile, args.configfile, profile, args.directory)
    except (ConfigError, PlanError, ValueError, OSError) as exc:
        print(f"vqarobust cloud-plan: {exc}", file=sys.stderr)
        return 2
    rows = cloud_plan.rule_rows(jobs, stored, images[1] / images[0], asked[1] / asked[0])
    command = _cloud_plan_command(args, given if args.throughput else [])
    block = gpu_hours.to_markdown(plan, priced, args.gpus, questions, lines, "", "--model")
    block = block.split("\n", 2)[2]  # the table and its words, without the comment line
    groups = cloud_plan.group_jobs(jobs)
    made = cloud_plan.to_markdown(
        rows, args.profile, profile, images, asked, block, command, groups
    )
    if args.check:
        return _check_block(made, args.check)
    print(made, end="")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from vqarobust.summary import summarize, to_markdown, to_text

    if error := database_error(args.database, "summary"):
        print(error, file=sys.stderr)
        return 2
    summary = summarize(args.database)
    if args.check:
        command = f"vqarobust summary {args.database} --markdown"
        return _check_block(to_markdown(summary, command), args.check)
    if args.markdown:
        command = f"vqarobust summary {args.database} --markdown"
        print(to_markdown(summary, command), end="")
    else:
        print(to_text(summary), end="")
    return 0


def _provenance(args: argparse.Namespace) -> int:
    from vqarobust.provenance import format_provenance, read

    try:
        print(format_provenance(read(args.database)))
    except (ValueError, duckdb_errors()) as exc:
        print(f"vqarobust provenance: {exc}", file=sys.stderr)
        return 2
    return 0


def _diff(args: argparse.Namespace) -> int:
    from vqarobust.provenance import diff, format_diff

    try:
        result = diff(args.a, args.b)
    except (ValueError, duckdb_errors()) as exc:
        print(f"vqarobust diff: {exc}", file=sys.stderr)
        return 2
    print(format_diff(result, args.a, args.b))
    return (
        1
        if result["inputs"] or result["tables"] or result["only_in_a"] or (result["only_in_b"])
        else 0
    )


def duckdb_errors() -> type[Exception]:
    """DuckDB's error base class (a missing or unreadable file), imported lazily."""
    import duckdb

    return duckdb.Error


def _export(args: argparse.Namespace) -> int:
    from vqarobust.export import export_records, sample_records

    if error := database_error(args.database, "export"):
        print(error, file=sys.stderr)
        return 2
    try:
        records = sample_records(args.database, args.model or (), args.perturbation or ())
    except (ValueError, duckdb_errors()) as exc:
        print(f"vqarobust export: {exc}", file=sys.stderr)
        return 2
    print(f"{records.height:,} records -> {export_records(records, args.out, args.format)}")
    return 0


def _hf_export(args: argparse.Namespace) -> int:
    from vqarobust.config import ConfigError
    from vqarobust.plan.export import export_run

    try:
        done = export_run(args.results, args.out, args.configfile, args.license, args.hub_repo)
    except (ConfigError, FileExistsError, FileNotFoundError, KeyError, ValueError) as exc:
        print(f"vqarobust hf-export: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    print(f"{len(done.rows)} configurations, {sum(done.rows.values()):,} rows -> {args.out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from vqarobust.report import render_report

    if args.template and not Path(args.template).is_file():
        print(f"vqarobust report: no template file {args.template}", file=sys.stderr)
        return 2
    if error := database_error(args.database, "report"):
        print(error, file=sys.stderr)
        return 2
    print(render_report(args.database, args.out, args.template))
    return 0


def _checkpoints_freeze(args: argparse.Namespace) -> int:
    from vqarobust.config import ConfigError, load_config
    from vqarobust.models.checkpoints import freeze

    try:
        config = load_config(args.config)
        names = args.models or [m for m, e in config["models"].items() if "train" in e]
        models_dir = Path("resources/models") / config["dataset"]["name"]
        database = args.database or f"results/{config['dataset']['name']}/robustness.duckdb"
        manifest = freeze(models_dir, names, args.out, config, args.config, database)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        print(f"vqarobust checkpoints freeze: {exc}", file=sys.stderr)
        return 2
    for name, model in manifest["models"].items():
        acc = model["accuracy"]
        print(
            f"{name}: {len(model['files'])} files, clean {acc['clean']:.3f}, blank "
            f"{acc['blank']:.3f} ({acc['blank_ratio']:.0%} of clean) -> "
            f"{args.out}/{name}"
        )
    return 0


def _checkpoints_table(args: argparse.Namespace) -> int:
    import json

    from vqarobust.models.checkpoints import MANIFEST, manifest_table

    print(manifest_table(json.loads((Path(args.folder) / MANIFEST).read_text())), end="")
    return 0


def _checkpoints_verify(args: argparse.Namespace) -> int:
    from vqarobust.models.checkpoints import verify

    problems = verify(args.folder)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print(f"{args.folder}: every file matches its manifest")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vqarobust`` command."""
    parser = argparse.ArgumentParser(
        prog="vqarobust", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_config_and_metrics(sub)
    _add_image_commands(sub)
    _add_run_commands(sub)
    _add_cost_estimate(sub)
    _add_gpu_hours(sub)
    _add_cloud_plan(sub)
    _add_checkpoint_commands(sub)
    _add_hf_export(sub)
    # Every command loads the installed plugins, and the modules --plugin names (those a
    # study lists under plugins:), before it looks a name up (docs/extending.md).
    commands = list(sub.choices.values())
    while commands:
        command = commands.pop()
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            commands += [c for a in nested for c in a.choices.values()]
        elif not any("--plugin" in a.option_strings for a in command._actions):
            command.add_argument("--plugin", action="append", help=PLUGIN_HELP)
    args = parser.parse_args(argv)
    setup_logging()
    # Installed plugins (and --plugin modules) before any command looks a name up.
    if (failed := _load_plugins(args)) is not None:
        return failed
    return args.func(args)


def _add_config_and_metrics(sub: Any) -> None:
    """The commands ``corruptions`` (and the other registries' listings),
    ``validate-config`` and ``metrics``."""
    p = sub.add_parser("corruptions", help="list registered corruptions, and where each is from")
    p.add_argument("--family", help="only this class (noise, blur, weather, ...)")
    p.add_argument("--plugin", action="append", help=PLUGIN_HELP)
    p.set_defaults(func=_corruptions)
    for name, what in (
        ("text-perturbations", "question perturbations"),
        ("rankers", "basic-question rankers"),
        ("families", "model families"),
        ("analyses", "analyses, in the order they run"),
    ):
        p = sub.add_parser(name, help=f"list registered {what}, and where each is from")
        p.add_argument("--plugin", action="append", help=PLUGIN_HELP)
        p.set_defaults(func=_listing)
    p = sub.add_parser(
        "validate-config",
        help="validate a workflow config file and name the inputs it names that are missing",
    )
    p.add_argument("config")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a data file, weights folder or other input is missing "
        "(by default each is a warning)",
    )
    p.set_defaults(func=_validate)
    p = sub.add_parser("metrics", help="robustness metrics from a long accuracy table")
    p.add_argument(
        "table",
        help="CSV/TSV/Parquet with model, perturbation, severity, accuracy "
        "(or one row per question: question_id, image_id, score instead of accuracy)",
    )
    p.add_argument("--out", required=True, help="directory for the CSV tables")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights", nargs="+", metavar="METRIC=W", help="explicit weights (sum 1)")
    g.add_argument("--preferences", nargs="+", metavar="METRIC=S", help="softmax preferences")
    from vqarobust.metrics.coverage import ON_MISSING
    from vqarobust.metrics.uncertainty import ADJUSTMENTS, CLUSTERS, Settings

    unc = Settings()  # the config's defaults, in one place
    p.add_argument(
        "--resamples",
        type=int,
        default=0,
        help="bootstrap resamples for intervals (needs one row per question)",
    )
    p.add_argument("--level", type=float, default=unc.level, help="interval coverage")
    p.add_argument(
        "--cluster",
        choices=CLUSTERS,
        default=unc.cluster,
        help="resampling unit (image needs an image_id column)",
    )
    p.add_argument("--seed", type=int, default=unc.seed, help="seed of the resamples")
    p.add_argument(
        "--adjust",
        choices=ADJUSTMENTS,
        default=unc.adjust,
        help="multiple-testing adjustment of the drop tests",
    )
    p.add_argument(
        "--on-missing",
        choices=ON_MISSING,
        default=ON_MISSING[0],
        help="a model without clean rows or lacking a subset another has: "
        "fail (error), or leave it out with a warning (drop)",
    )
    p.set_defaults(func=_metrics)


def _add_image_commands(sub: Any) -> None:
    """The commands ``preview`` and ``images export``."""
    p = sub.add_parser("preview", help="corruption x severity grid of one image")
    p.add_argument("image", nargs="?", help="an image file (or --images and --id)")
    p.add_argument(
        "--images", help="a prepared image folder, e.g. resources/datasets/easy-vqa/eval/images"
    )
    p.add_argument(
        "--id",
        type=int,
        help="the image id in --images (seeded as the "
        "workflow does: each cell is what its corrupt_images job stores)",
    )
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--corruptions", nargs="+", help="names (default: the 14 of the benchmark)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stylize-weights", help="stylize: folder with the AdaIN weight files")
    p.add_argument("--stylize-styles", help="stylize: folder of style images")
    p.set_defaults(func=_preview)
    p = sub.add_parser("images", help="the images of a prepared or corrupted subset")
    images = p.add_subparsers(dest="images_command", required=True)
    p = images.add_parser("export", help="write a subset's images as files (bytes as stored)")
    p.add_argument(
        "images",
        help="an image folder, e.g. results/easy-vqa/images/snow/3 or "
        "resources/datasets/easy-vqa/eval/images",
    )
    p.add_argument("--out", required=True, help="folder to write <image_id>.png|jpg into")
    p.add_argument("--ids", type=int, nargs="+", help="only these image ids")
    p.set_defaults(func=_images_export)


def _add_check(p: argparse.ArgumentParser, what: str) -> None:
    """``--check FILE``: compare FILE with this ``what`` (a docs block the command wrote)."""
    p.add_argument(
        "--check",
        metavar="FILE",
        help=f"compare FILE with this {what}; exit 1 with a diff when a line differs",
    )


def _add_run_commands(sub: Any) -> None:
    """The commands that read a run's DuckDB file."""
    p = sub.add_parser("summary", help="headline numbers of a run, from its DuckDB file")
    p.add_argument("database")
    p.add_argument("--markdown", action="store_true", help="the README's Markdown block")
    _add_check(p, "run's Markdown block")
    p.set_defaults(func=_summary)
    p = sub.add_parser(
        "plan-size",
        help="images a study needs for a given interval "
        "half-width and detectable difference, from a pilot run",
    )
    p.add_argument("database", help="the pilot run's results DuckDB file")
    for flag, default, what in (
        ("--half-width", 0.01, "half-width of each statistic's interval"),
        ("--detect", 0.01, "size of a paired difference between two models to find"),
        ("--power", 0.8, "chance of finding that difference"),
        ("--level", 0.95, "level of the intervals"),
    ):
        p.add_argument(flag, type=float, default=default, help=f"{what} (default {default})")
    _add_check(p, "plan")
    p.set_defaults(func=_plan_size)
    p = sub.add_parser("provenance", help="code, versions, config, data and weights of a run")
    p.add_argument("database")
    p.set_defaults(func=_provenance)
    p = sub.add_parser(
        "diff", help="which inputs and tables differ between two runs (exit 1 when any does)"
    )
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=_diff)
    p = sub.add_parser(
        "export", help="per-sample records (model x subset x question) of a results DuckDB file"
    )
    p.add_argument("database")
    p.add_argument("--format", choices=["parquet", "jsonl", "csv"], default="parquet")
    p.add_argument("--out", required=True, help="file to write")
    p.add_argument("--model", action="append", help="only this model (repeatable)")
    p.add_argument(
        "--perturbation",
        action="append",
        help="only this perturbation; clean: the clean subset (repeatable)",
    )
    p.set_defaults(func=_export)
    p = sub.add_parser("report", help="render the HTML report from a results DuckDB file")
    p.add_argument("database")
    p.add_argument("--out", required=True, help="path of index.html to write")
    p.add_argument(
        "--template",
        help="a Jinja2 page of one's own; it may extend "
        '"report.html.j2" and replace its blocks (docs/report.md)',
    )
    p.set_defaults(func=_report)


def _add_cost_estimate(sub: Any) -> None:
    """The command ``cost-estimate``: a study's cost scaled from a pilot run."""
    p = sub.add_parser(
        "cost-estimate",
        help="what a study will cost (GPU-hours, CPU-hours, "
        "tokens, money), scaled from a finished pilot run's costs",
    )
    p.add_argument(
        "--pilot",
        required=True,
        help="the pilot's results DuckDB file or results folder (results/<dataset>)",
    )
    p.add_argument("--configfile", required=True, help="the target study's config")
    p.add_argument(
        "--questions",
        type=int,
        help="the target's number of questions (default: "
        "its prepared questions file, else dataset.n_images x the pilot's "
        "questions per image)",
    )
    p.add_argument(
        "--model",
        action="append",
        metavar="TARGET=PILOT",
        help="scale target "
        "model TARGET from pilot model PILOT (repeatable; default: the same name)",
    )
    p.set_defaults(func=_cost_estimate)


def _add_gpu_hours(sub: Any) -> None:
    """The command ``gpu-hours`` (docs/paper.md, "GPU-hours before the run")."""
    p = sub.add_parser(
        "gpu-hours",
        help="GPU-hours per model and wall time on N GPUs of a study config, from a "
        "measured throughput table or a pilot run",
    )
    p.add_argument("--configfile", required=True, help="the target study's config")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--throughput",
        metavar="TABLE",
        help="a throughput table (JSON of benchmarks/gpu_throughput.py --json, e.g. "
        "docs/results/gpu-throughput-h200.json; default: the config's resources.throughput)",
    )
    source.add_argument(
        "--pilot",
        help="a finished pilot run on your GPU: its results DuckDB file or results folder",
    )
    _add_pricing(p)
    _add_check(p, "estimate")
    p.set_defaults(func=_gpu_hours)


def _add_pricing(p: argparse.ArgumentParser) -> None:
    """The options of gpu-hours' pricing (:func:`_price_gpus`), shared with cloud-plan."""
    p.add_argument("--gpus", type=int, default=1, help="GPUs the jobs share (default 1)")
    p.add_argument(
        "--questions",
        type=int,
        help="the target's questions per subset and severity (default: its prepared "
        "questions file, else dataset.n_images x the source's questions per image)",
    )
    p.add_argument(
        "--model",
        action="append",
        metavar="TARGET=MEASURED",
        help="price target model TARGET as the table's or pilot's model MEASURED (repeatable)",
    )
    p.add_argument(
        "--fastest",
        action="store_true",
        help="price each model at its fastest measured setting, not the one nearest its entry",
    )


def _add_cloud_plan(sub: Any) -> None:
    """The command ``cloud-plan`` (docs/cloud.md, "Before a cloud run")."""
    p = sub.add_parser(
        "cloud-plan",
        help="jobs, submissions, GPU-hours and storage bytes of a study config on a "
        "cluster or cloud profile, from a finished pilot run",
    )
    p.add_argument(
        "--profile",
        action="append",
        required=True,
        help="a Snakemake profile folder, e.g. profiles/kubernetes (repeatable: merged as "
        "Snakemake merges them)",
    )
    p.add_argument("--configfile", required=True, help="the target study's config")
    p.add_argument(
        "--pilot",
        required=True,
        help="a finished pilot run's results folder or DuckDB file, run from its own "
        "working directory (its .snakemake/metadata names each output's rule)",
    )
    p.add_argument(
        "--throughput",
        metavar="TABLE",
        help="price GPU time from this throughput table instead of the pilot",
    )
    _add_pricing(p)
    p.add_argument("--snakefile", default="Snakefile", help="the workflow (default Snakefile)")
    p.add_argument(
        "--directory",
        default=".",
        help="where the target's dry run resolves its inputs (default: here)",
    )
    _add_check(p, "plan")
    p.set_defaults(func=_cloud_plan)


def _add_hf_export(sub: Any) -> None:
    """The command ``hf-export`` (docs/interop.md)."""
    p = sub.add_parser(
        "hf-export",
        help="a finished run's subsets as a Hugging Face dataset folder with lmms-eval tasks",
    )
    p.add_argument("results", help="the run's results folder, e.g. results/easy-vqa")
    p.add_argument("--out", required=True, help="dataset folder to write (new or empty)")
    p.add_argument(
        "--configfile",
        help="the run's config (default: config/config.yaml of the folder holding results/)",
    )
    p.add_argument("--license", help="the source's licence as a Hub id (default: the adapter's)")
    p.add_argument(
        "--hub-repo",
        help="the tasks' dataset_path: a Hub dataset id to push to (default: --out's path)",
    )
    p.set_defaults(func=_hf_export)


def _add_checkpoint_commands(sub: Any) -> None:
    """The commands ``checkpoints freeze`` and ``checkpoints verify``."""
    p = sub.add_parser("checkpoints", help="the reference checkpoints the default study ships")
    commands = p.add_subparsers(dest="checkpoints_command", required=True)
    p = commands.add_parser(
        "freeze",
        help="copy a study's trained models beside a manifest "
        "of digests, recipe, commit and accuracy",
    )
    p.add_argument(
        "--config",
        default="config/reference-models.yaml",
        help="the study config that trained them",
    )
    p.add_argument("--database", help="its results (default results/<dataset>/robustness.duckdb)")
    p.add_argument("--out", default="checkpoints/easy-vqa", help="folder to write")
    p.add_argument("--models", nargs="+", help="only these models (default: every trained one)")
    p.set_defaults(func=_checkpoints_freeze)
    p = commands.add_parser(
        "verify", help="compare a checkpoint folder with its manifest (exit 1 when a file differs)"
    )
    p.add_argument("folder", nargs="?", default="checkpoints/easy-vqa")
    p.set_defaults(func=_checkpoints_verify)
    p = commands.add_parser("table", help="the manifest's accuracy as docs/models.md's table")
    p.add_argument("folder", nargs="?", default="checkpoints/easy-vqa")
    p.set_defaults(func=_checkpoints_table)


if __name__ == "__main__":
    sys.exit(main())
