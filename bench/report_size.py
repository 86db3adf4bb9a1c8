"""How big and how fast ``report.html`` is for a full 128k run, drill-down included.

A stand-in model answers every prompt of the 128k suite (9,200 samples): right
on about half of them (chosen by a stable hash of the sample id), a wrong
sentence on the rest. Its answers are graded by the real evaluator code
(``needlebench.grading.evaluation``: per-sample records with the gold and the haystack
around each needle), written as an OpenCompass run folder, and the report is
built from it. Reported: samples, the size of the page and of its embedded
sample list, and the seconds each step took.

    .venv/bin/python -m bench.report_size            # writes bench/report_size.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and write ``bench/report_size.json``.

    Args:
        argv: ``--suite`` (default 128k) and ``--out``.
    """
    from needlebench.cache.rows import load_rows
    from needlebench.grading.evaluation import grade_rows, write_results
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.report import build
    from needlebench.scoring import ScoreOptions
    from needlebench.seeding import stable_hash
    from needlebench.tasks import config_params, get_task

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--suite", default="128k")
    parser.add_argument("--out", default=str(ROOT / "bench" / "report_size.json"))
    args = parser.parse_args(argv)
    timings: dict[str, float] = {}
    samples = 0
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "20260101_000000"
        folder = run / "results" / "standin"
        folder.mkdir(parents=True)
        t = time.perf_counter()
        datasets = needlebench_datasets(suite=args.suite)
        rows_by = {d["abbr"]: load_rows(d["task"], **config_params(d)) for d in datasets}
        timings["datasets_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for d in datasets:
            rows = rows_by[d["abbr"]]
            spec = get_task(d["task"])
            preds = [
                spec.oracle(json.loads(gold)) if int(stable_hash(sid, digest_size=4), 16) % 2 else "It is not stated."
                for sid, gold in zip(rows["id"], rows["answer"])
            ]
            options = ScoreOptions(**{k: v for k, v in d["eval_cfg"]["evaluator"].items() if k == "metric"})
            records = grade_rows(preds, list(rows["answer"]), rows, spec, options)
            write_results(folder / d["abbr"], records, spec)
            samples += len(records)
        timings["grade_s"] = time.perf_counter() - t
        t = time.perf_counter()
        page, rep = build([run], run / "summary")
        timings["report_s"] = time.perf_counter() - t
        result = {
            "suite": args.suite,
            "samples": samples,
            "heatmaps": len(rep.heatmaps),
            "report_html_bytes": page.stat().st_size,
            "embedded_samples_bytes": len(rep.samples.payload()),
            "samples_jsonl_bytes": sum(p.stat().st_size for p in folder.glob("*.samples.jsonl")),
            **{k: round(v, 1) for k, v in timings.items()},
        }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
