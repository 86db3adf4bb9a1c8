"""The README's excerpt of what the main job writes, taken from a real run of the main job's config.

The excerpt is the start and end of the run's ``summary/needlebench_summary.csv``: its header, the S-RT
English rows, the S-RT overall row and the M-RT overall row, each line as the file holds it. It stands in
``README.md`` and ``docs/guide/first-run.md`` between ``<!-- BEGIN main-job-excerpt -->`` and
``<!-- END main-job-excerpt -->``; ``tests/test_e2e_opencompass.py`` runs the main job's config and fails
when the pages and the run differ.

    python -m tools.readme_excerpt             # run the main job's config through opencompass, then rewrite
    python -m tools.readme_excerpt RUN_DIR     # rewrite from a finished run of that config
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.docs_pages import read_block, sync_page

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/eval_needlebench_tiny.py"  # what scripts/main.sh runs
PAGES = (ROOT / "README.md", ROOT / "docs" / "guide" / "first-run.md")
BLOCK = "main-job-excerpt"
GAP = "..."


def excerpt(summary_csv: str) -> str:
    """The excerpt of a ``needlebench_summary.csv``, as a fenced block.

    Args:
        summary_csv: the file's text.

    Raises:
        ValueError: the file has none of the rows the excerpt shows (not a run of the main job's config).
    """
    lines = summary_csv.splitlines()
    keyed = [(tuple(next(csv.reader([line]))[:3]), line) for line in lines[1:] if line]
    start = [line for (task, lang, _), line in keyed if (task, lang) == ("S-RT", "EN")]
    ends = [line for (task, lang, length), line in keyed if lang == "OVERALL" and length == "all"]
    if not start or not ends:
        raise ValueError("no S-RT English rows or no task overall rows: not a summary of the main job's config")
    body = [lines[0], *start]
    for line in ends:
        body += [GAP, line]
    return "```\n" + "\n".join(body) + "\n```"


def page_excerpt(page: Path) -> str:
    """The excerpt a page shows now.

    Args:
        page: ``README.md`` or ``docs/guide/first-run.md``.
    """
    return read_block(page.read_text(encoding="utf-8"), BLOCK)


def run_main_job(work: Path) -> Path:
    """Run the main job's config through ``opencompass`` into ``work``; the run folder it made.

    Args:
        work: an empty work dir.

    Raises:
        RuntimeError: opencompass failed (its last output is in the message).
    """
    opencompass = Path(sys.executable).with_name("opencompass")
    done = subprocess.run(
        [str(opencompass), CONFIG, "-w", str(work)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"opencompass {CONFIG} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    return run


def main(argv: list[str] | None = None) -> int:
    """Rewrite the pages' excerpt from a run of the main job's config (made here unless one is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a finished run folder of the main job's config (outputs/.../<time>/)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nb-main-job-") as tmp:
        run = Path(args.run) if args.run else run_main_job(Path(tmp))
        text = excerpt((run / "summary" / "needlebench_summary.csv").read_text(encoding="utf-8"))
        for page in PAGES:
            changed = sync_page(page, {BLOCK: text}, check=False)
            print(f"{'rewrote' if changed else 'unchanged'}: {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
