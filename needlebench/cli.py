"""``needlebench`` command: export prompts of a config, plan its cost, rebuild reports."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["main", "iter_config_samples"]


def iter_config_samples(config_path: str) -> Iterator[tuple[str, Any]]:
    """(dataset abbr, Sample) for every needlebench dataset of an OpenCompass config, streamed.

    Args:
        config_path: the config file.
    """
    from .opencompass.configs import load_config
    from .tasks import config_params, get_task, make_params

    _, ours = load_config(config_path)
    for d in ours:
        for sample in get_task(d["task"]).generate(make_params(d["task"], **config_params(d))):
            yield d["abbr"], sample


def _export(args: argparse.Namespace) -> int:
    from .store import atomic_write

    out = Path(args.output)
    count = 0
    with atomic_write(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for abbr, sample in iter_config_samples(args.config):
            fh.write(json.dumps(sample.export_row(abbr), ensure_ascii=False, sort_keys=False) + "\n")
            count += 1
    print(f"wrote {count} samples to {out}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .plan import format_plan, plan_config

    plan = plan_config(args.config, num_shards=args.shards)
    print(plan.to_json() if args.json else format_plan(plan))
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report.html import build, significance_lines

    path, rep = build([Path(p) for p in args.work_dirs], Path(args.output) if args.output else None)
    print(f"report written to {path}")
    for line in significance_lines(rep):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``needlebench`` command line (``export``, ``plan`` or ``report``).

    Args:
        argv: the arguments without the program name; None reads ``sys.argv``.

    Returns:
        The exit status: 0 on success, 2 for a bad config or input (the message goes to stderr).
    """
    parser = argparse.ArgumentParser(prog="needlebench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write every sample of a config's needlebench datasets as JSON lines")
    ex.add_argument("config")
    ex.add_argument("-o", "--output", required=True)
    ex.set_defaults(func=_export)
    pl = sub.add_parser("plan", help="per model: samples, tokens, cut cells, shards and prefix reuse of a config")
    pl.add_argument("config")
    pl.add_argument("--json", action="store_true", help="print one JSON object")
    pl.add_argument("--shards", type=int, default=None, help="shards per model (default: the config's num_shards)")
    pl.set_defaults(func=_plan)
    rp = sub.add_parser("report", help="rebuild tables, figures and report.html from OpenCompass work dirs")
    rp.add_argument("work_dirs", nargs="+")
    rp.add_argument("-o", "--output", default=None, help="output folder (default: WORK_DIR/needlebench_report)")
    rp.set_defaults(func=_report)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"needlebench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
