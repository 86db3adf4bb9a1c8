"""``needlebench`` command: plan a config's cost, export its prompts, score predictions made elsewhere, rebuild
reports, put runs on a leaderboard beside the papers' rows, verify a run's result bundle, check parity with
OpenCompass on your own files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import ConfigError
from .export import iter_config_samples

__all__ = ["build_parser", "main", "iter_config_samples"]


def _export(args: argparse.Namespace) -> int:
    from .export import write_jsonl, write_parquet

    target = args.out or args.output
    if not target:
        raise ConfigError("export: give the output (a file for jsonl, a folder for parquet)")
    if args.format == "parquet":
        written = write_parquet(args.config, Path(target), quiet=args.quiet)
        total = sum(d.info["samples"] for d in written)
        print(f"wrote {total} samples in {len(written)} Parquet file(s) and README.md to {target}")
    else:
        count = write_jsonl(args.config, Path(target), quiet=args.quiet)
        print(f"wrote {count} samples to {target}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from .score import score_predictions

    run = score_predictions(Path(args.predictions), Path(args.export), Path(args.output), args.model, args.quiet)
    for problem in run.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(f"scored {run.scored} prediction(s); {run.missing} sample(s) of the export had none (counted, not scored)")
    print(f"results and tables in {run.run_dir}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .plan import format_plan, plan_config

    plan = plan_config(args.config, num_shards=args.shards, prices_path=args.prices)
    if args.rates is None and not args.adaptive:
        print(plan.to_json() if args.json else format_plan(plan, verbose=args.verbose))
        return 0
    from ..planning.costs import load_prices
    from ..report.results import recorded_prices
    from .adaptive_plan import adaptive_plan, format_adaptive
    from .rates import format_rates, rate_plan, run_rates

    run = Path(args.rates) if args.rates else None
    rates = run_rates(run) if run else None
    prices = load_prices(args.prices) if args.prices else (recorded_prices([run]) if run else None)
    predicted, missing = rate_plan(plan, run, prices, rates) if run else ([], [])
    adaptive = adaptive_plan(plan, rates=rates, prices=prices) if args.adaptive else []
    if args.json:
        data = json.loads(plan.to_json())
        if run:
            data["rates"] = {"predictions": [p.to_dict() for p in predicted], "no_rates": missing}
        if args.adaptive:
            data["adaptive"] = [a.to_dict() for a in adaptive]
        print(json.dumps(data, ensure_ascii=False))
        return 0
    text = format_plan(plan, verbose=args.verbose)
    text += ("\n" + format_rates(predicted, missing)) if run else ""
    print(text + (("\n" + format_adaptive(adaptive)) if args.adaptive else ""))
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..aggregate.effective_length import EffectiveRule
    from ..planning.costs import load_prices
    from ..report.html import build, significance_lines

    rule = EffectiveRule(args.effective_rule, args.effective_share, args.effective_threshold)
    claimed = {}
    for item in args.claimed or ():
        model, _, tokens = item.rpartition("=")
        if not model or not tokens.isdigit():
            raise ConfigError(f"report --claimed {item!r}: give MODEL=TOKENS, e.g. qwen2.5-7b=131072")
        claimed[model] = int(tokens)
    out = Path(args.output) if args.output else None
    prices = load_prices(args.prices) if args.prices else None
    path, rep = build([Path(p) for p in args.work_dirs], out, args.quiet, rule, claimed, prices)
    print(f"report written to {path}")
    for line in significance_lines(rep):
        print(line)
    return 0


def _parity(args: argparse.Namespace) -> int:
    from .parity import run_parity

    passed, written = run_parity(
        Path(args.data), Path(args.output), args.profile, args.suite, args.render, args.tasks, args.all, args.quiet
    )
    print(f"{'passed' if passed else 'FAILED'}: {written} and parity.md beside it")
    return 0 if passed else 1


def _leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import make_leaderboard, summary_lines

    lb, written = make_leaderboard([Path(p) for p in args.runs], Path(args.output), published=not args.no_published)
    for warning in lb.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for line in summary_lines(lb):
        print(line)
    print(f"leaderboard written to {', '.join(str(p) for p in written.values())}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from .leaderboard import verification_lines, verify

    found = verify(Path(args.bundle), Path(args.run))
    for line in verification_lines(found, Path(args.bundle), Path(args.run)):
        print(line)
    return 0 if found.ok else 1


def _retry(args: argparse.Namespace) -> int:
    from .retry import retry_run

    return retry_run(Path(args.run), dry_run=args.dry_run, models=args.model or ())


def _prompt(args: argparse.Namespace) -> int:
    from .prompt import show_prompt

    return show_prompt(Path(args.run), args.sample_id, model=args.model)


def _run(args: argparse.Namespace) -> int:
    from .run import run_config

    run_config(args.config, args.options, replan=args.replan, retry=args.retry, adaptive=args.adaptive)
    return 0


def _status(args: argparse.Namespace) -> int:
    from .status import show_status

    if args.interval <= 0:
        raise ConfigError(f"status: --interval {args.interval}; give a number of seconds above 0")
    return show_status(Path(args.run), as_json=args.json, watch=args.watch, interval=args.interval)


def _batch(args: argparse.Namespace) -> int:
    from .batch import collect_batch, prepare_batch

    if args.action == "prepare":
        return prepare_batch(Path(args.target), Path(args.work_dir), models=args.model or ())
    if not args.results:
        raise ConfigError("batch collect: give the run folder and at least one result file")
    return collect_batch(Path(args.target), [Path(r) for r in args.results], model=(args.model or [None])[-1])


def _command(sub: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    """A sub-command whose one-line summary is both its entry in ``needlebench --help`` and its own description."""
    return sub.add_parser(name, help=text, description=text)


def build_parser() -> argparse.ArgumentParser:
    """The ``needlebench`` argument parser: one sub-command per job, every argument with its help text.

    Returns:
        The parser; ``main`` parses with it, and the docs and tests read each command's ``--help`` from it.
    """
    parser = argparse.ArgumentParser(
        prog="needlebench",
        description="plan a config's cost, export its prompts, score predictions made elsewhere, rebuild reports",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rn = _command(
        sub,
        "run",
        "run a config as `opencompass CONFIG [options]` does, the same code and files, without importing every "
        "dataset, model and summarizer OpenCompass ships first (about 5-8 s of CPU less per run)",
    )
    rn.add_argument(
        "config",
        metavar="CONFIG",
        help="the config, then any option `opencompass` takes after it (-w DIR, -r [TIME], -m infer, ...)",
    )
    rn.add_argument(
        "--replan",
        action="store_true",
        help="resuming a run (-r) whose config now gives another plan: re-plan it, keeping every answer still valid "
        "(same prompt, model and output budget) and asking the rest, instead of stopping",
    )
    rn.add_argument(
        "--retry",
        nargs="?",
        const="",
        metavar="MODELS",
        help="resuming a run (-r): ask again the failed requests of these models only (comma-separated abbrs); "
        "every model's without a value, as any resume does",
    )
    rn.add_argument(
        "--adaptive",
        action="store_true",
        help="an adaptive run where the config's runtime() sets none (the ladder's defaults): each length's prompts "
        "asked only until its effective length is decided, every round one after another (docs: The adaptive "
        "length ladder); give it again to resume the run",
    )
    rn.set_defaults(func=_run)
    pl = _command(
        sub, "plan", "per model: samples, tokens, cut cells, window and devices checks, shards and prefix reuse"
    )
    pl.add_argument(
        "config", help="an OpenCompass eval config (.py); NEEDLEBENCH_MODELS is read as opencompass reads it"
    )
    pl.add_argument("--json", action="store_true", help="print one JSON object (every shard's slices included)")
    pl.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also each shard's dataset slices, the cells cut per dataset and depth, and how each number is estimated",
    )
    pl.add_argument("--shards", type=int, default=None, help="shards per model (default: the config's num_shards)")
    pl.add_argument(
        "--prices",
        metavar="PRICES.toml",
        help="per model: input, cached input and output dollars per million tokens, long-prompt tiers, batch "
        "fraction; prints each dataset's cost online and batch (docs: Cost before the first request)",
    )
    pl.add_argument(
        "--rates",
        metavar="RUN",
        help="an earlier run folder of the same models on the same engine: predict wall time, device-hours and "
        "money at its measured rates (docs: Cost from an earlier run)",
    )
    pl.add_argument(
        "--adaptive",
        action="store_true",
        help="what the adaptive length ladder would ask of each model: the full grid, three scenarios and the "
        "median and p90 of 60 scripted curves (with --rates: seconds and money; docs: The adaptive length ladder)",
    )
    pl.set_defaults(func=_plan)
    ex = _command(sub, "export", "write every sample of a config's needlebench datasets (JSON lines or Parquet)")
    ex.add_argument("config", help="an OpenCompass eval config (.py) whose needlebench datasets are written")
    ex.add_argument("out", nargs="?", help="output file (jsonl) or folder (parquet); or give it as -o")
    ex.add_argument("-o", "--output", default=None, help="the same as OUT")
    ex.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="jsonl: one file of every sample; parquet: a file per dataset and a README.md dataset card",
    )
    ex.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    ex.set_defaults(func=_export)
    sc = _command(sub, "score", "grade predictions made elsewhere against a Parquet export")
    sc.add_argument("predictions", help='the predictions to grade, JSON lines: {"id": ..., "prediction": ...}')
    sc.add_argument("--export", required=True, help="the folder `needlebench export --format parquet` wrote")
    sc.add_argument("-o", "--output", default="outputs/needlebench_score", help="runs go to OUTPUT/<timestamp>/")
    sc.add_argument("--model", default="external", help="the model's name in the results and tables")
    sc.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    sc.set_defaults(func=_score)
    rp = _command(sub, "report", "rebuild tables, figures and report.html from OpenCompass work dirs")
    rp.add_argument(
        "work_dirs",
        nargs="+",
        help="OpenCompass work dirs (outputs/<name>/: its timestamped runs, a later run's results replacing "
        "an earlier one's) or run folders (outputs/<name>/<time>/); two or more are compared model by model",
    )
    rp.add_argument(
        "-o", "--output", default=None, help="output folder (default: the first WORK_DIR/needlebench_report)"
    )
    rp.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    rp.add_argument(
        "--effective-rule",
        default="relative",
        help="effective context length: relative (a share of the model's own shortest-length score, NoLiMa's) or "
        "absolute (a fixed score, RULER's)",
    )
    rp.add_argument("--effective-share", type=float, default=0.85, help="the relative rule's share, in (0, 1]")
    rp.add_argument("--effective-threshold", type=float, default=85.6, help="the absolute rule's score, in (0, 100]")
    rp.add_argument(
        "--prices",
        metavar="FILE",
        help="a prices file (as for `needlebench plan --prices`; device_hour for a model on your own devices): "
        "the cost ledger's money column",
    )
    rp.add_argument(
        "--claimed",
        action="append",
        metavar="MODEL=TOKENS",
        help="the context length a model claims, where not its max_seq_len in the run's plan (repeat per model)",
    )
    rp.set_defaults(func=_report)
    lb = sub.add_parser(
        "leaderboard",
        help="rank models of several runs in the papers' table shapes, beside the papers' published rows",
        description="Read each RUN, lay its models out on the papers' table shapes (the sparse suites' tables and each "
        "task's own table) beside the papers' published rows, and write leaderboard.csv, leaderboard.md and "
        "leaderboard.html into OUTPUT. Every number carries its 95% interval and completeness; each row says "
        "whether it may be read beside a published row and, if not, what differs.",
    )
    lb.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a run to read: an OpenCompass work dir (its latest results per dataset) or one of its timestamped "
        "run folders, or a folder `needlebench score` wrote; give as many as you like",
    )
    lb.add_argument(
        "-o", "--output", required=True, help="folder for leaderboard.csv, leaderboard.md, leaderboard.html"
    )
    lb.add_argument("--no-published", action="store_true", help="leave the papers' published rows out")
    lb.set_defaults(func=_leaderboard)
    vf = _command(
        sub,
        "verify",
        "recompute a run's results.json from its graded samples and list what differs (exit 1 if anything)",
    )
    vf.add_argument("bundle", metavar="BUNDLE", help="the results.json to check (from a run's summary folder)")
    vf.add_argument("run", metavar="RUN", help="the run folder or work dir the bundle claims to come from")
    vf.set_defaults(func=_verify)
    rt = _command(sub, "retry", "ask again the failed requests of a finished run (every answered sample kept)")
    rt.add_argument("run", metavar="RUN", help="the run folder (<work_dir>/<time>) whose failed requests to ask again")
    rt.add_argument("--dry-run", action="store_true", help="list them per model and dataset, ask nothing")
    rt.add_argument("--model", action="append", help="only this model's (by abbr; give it again for more)")
    rt.set_defaults(func=_retry)
    st = _command(
        sub,
        "status",
        "where a run stands, from its files alone: done and planned per model and dataset, the rate, an ETA, "
        "failed and throttled requests, its tasks; for a run that stopped, what is left and the command that finishes it",
    )
    st.add_argument("run", metavar="RUN", help="a run folder (<work_dir>/<time>) or a work dir (its newest run)")
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.add_argument("--watch", action="store_true", help="redraw until the run is no longer running (Ctrl-C stops)")
    st.add_argument("--interval", type=float, default=2.0, help="seconds between redraws with --watch (default 2)")
    st.set_defaults(func=_status)
    pr = _command(sub, "prompt", "a sample's prompt read back from the dataset cache (for runs that keep digests)")
    pr.add_argument("run", metavar="RUN", help="the run folder (<work_dir>/<time>)")
    pr.add_argument(
        "sample_id", metavar="SAMPLE_ID", help="the sample's id (a record's id, a digest entry's sample_id)"
    )
    pr.add_argument("--model", help="the model whose limit picks the rows (default: the plan's first)")
    pr.set_defaults(func=_prompt)
    ba = _command(
        sub,
        "batch",
        "prepare: write a config's or run's API requests as OpenAI Batch JSONL; collect: read the results back "
        "into the run's prediction files (then `opencompass CONFIG -r` evaluates)",
    )
    ba.add_argument(
        "action",
        metavar="ACTION",
        choices=("prepare", "collect"),
        help="prepare: write the request files; collect: read results",
    )
    ba.add_argument(
        "target", metavar="TARGET", help="prepare: a config (.py: a new run) or a run folder; collect: the run folder"
    )
    ba.add_argument("results", nargs="*", metavar="RESULTS", help="collect: the batch result files (JSON lines)")
    ba.add_argument(
        "-w", "--work-dir", default="outputs/needlebench_batch", help="prepare CONFIG: where the new run goes"
    )
    ba.add_argument("--model", action="append", help="only this API model's (by abbr; give it again for more)")
    ba.set_defaults(func=_batch)
    pa = _command(
        sub,
        "parity",
        "build a suite's prompts with the installed OpenCompass's loaders and ours from your data files, compare "
        "them byte for byte and score outputs with both evaluators (exit 1 on an unattributed byte or a score "
        "disagreement)",
    )
    pa.add_argument("data", metavar="DATA", help="OpenCompass's NeedleBench data folder (e.g. ./data/needlebench)")
    pa.add_argument(
        "--profile", default="v1", choices=("v2", "v1"), help="OpenCompass's needlebench_v2 or needlebench configs"
    )
    pa.add_argument("--suite", default="4k", help="4k, 8k, 32k, 128k, 200k, 256k or 1000k (default 4k)")
    pa.add_argument(
        "--render", default="prompt", choices=("prompt", "raw"), help="PromptTemplate or *_rawprompt.py configs (v1)"
    )
    pa.add_argument("--tasks", nargs="+", help="the sparse tasks to check (default: all three)")
    pa.add_argument("--all", action="store_true", help="every cell at the config's repeats, not a sample")
    pa.add_argument("-o", "--output", default=".", help="folder for parity.json and parity.md (default: here)")
    pa.add_argument("--quiet", action="store_true", help="no line per compared cell")
    pa.set_defaults(func=_parity)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``needlebench`` command line (``run``, ``plan``, ``export``, ``score``, ``report``, ``leaderboard``, ``verify``,
    ``retry``, ``status``, ``batch``, ``parity``).

    Args:
        argv: the arguments without the program name; None reads ``sys.argv``.

    Returns:
        The exit status: 0 on success, 1 when ``verify`` finds a difference, ``retry`` or ``batch collect``
        leaves requests failed or ``parity`` finds an unattributed byte or a score disagreement, 2 for a bad config or input
        (the message goes to stderr).
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "run":
        args.options = extra  # OpenCompass's own options, handed on as given
    elif args.command == "export" and len(extra) == 1 and not args.out and not extra[0].startswith("-"):
        args.out = extra[0]  # `export CONFIG --format parquet OUT`: the output after the options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"needlebench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
