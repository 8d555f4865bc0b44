"""Command line: ``vqarobust <command>``, for use without Snakemake."""

from __future__ import annotations

import argparse
import sys

from vqarobust.logs import setup_logging


def _corruptions(args: argparse.Namespace) -> int:
    from vqarobust import corruptions

    for name in corruptions.names(family=args.family):
        entry = corruptions.CORRUPTIONS.entry(name)
        bench = "benchmark" if entry.tags.get("benchmark") else ""
        print(f"{name:20s} {entry.tags['family']:10s} 1..{corruptions.max_severity(name)} {bench}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from vqarobust.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{args.config}: valid ({len(config['models'])} models, "
          f"{len(config['corruptions'])} corruptions)")  # fmt: skip
    return 0


def _report(args: argparse.Namespace) -> int:
    from vqarobust.report import render_report

    print(render_report(args.database, args.out))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vqarobust`` command."""
    parser = argparse.ArgumentParser(prog="vqarobust", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("corruptions", help="list registered corruptions")
    p.add_argument("--family", help="only this class (noise, blur, weather, ...)")
    p.set_defaults(func=_corruptions)
    p = sub.add_parser("validate-config", help="validate a workflow config file")
    p.add_argument("config")
    p.set_defaults(func=_validate)
    p = sub.add_parser("report", help="render the HTML report from a results DuckDB file")
    p.add_argument("database")
    p.add_argument("--out", required=True, help="path of index.html to write")
    p.set_defaults(func=_report)
    args = parser.parse_args(argv)
    setup_logging()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
