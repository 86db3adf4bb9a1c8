"""``needlebench parity``: the parity proof a user runs, run here on the project's stand-in OpenCompass data.

The stand-in folder holds OpenCompass's file formats (``bench/standin.py``); the check reads OpenCompass's own
installed configs and loaders, so a pass here is the same claim a user's pass makes on the real files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from needlebench import parity
from needlebench.commands.cli import main


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("oc"))


@pytest.mark.parametrize(("profile", "render"), [("v2", "prompt"), ("v1", "prompt"), ("v1", "raw")])
def test_parity_passes_on_opencompass_files(data: Path, tmp_path: Path, profile: str, render: str) -> None:
    """Every compared prompt is identical or a listed fix, every output scores alike, both languages, each task."""
    out = tmp_path / "parity"
    code = main(
        ["parity", str(data), "--profile", profile, "--suite", "4k", "--render", render, "-o", str(out), "--quiet"]
    )
    report = json.loads((out / "parity.json").read_text(encoding="utf-8"))
    assert code == 0 and report["passed"], report["unattributed"][:3] + report["disagreements"][:3]
    assert set(report["tasks"]) == {"srt", "mrt", "mrs"}
    assert all(row["prompts"] == 8 for row in report["tasks"].values())  # 4 lengths x 2 languages each
    for row in report["tasks"].values():  # how far split moved needles: counted over the prompts it touched
        touched = sum(n for tag, n in row["attributions"].items() if "split" in tag.split("+"))
        assert row["split"] == touched and (row["moved_needles"] >= touched)
        assert row["move_tokens_max"] >= row["move_tokens_median"] >= (1 if touched else 0)
    assert sum(row["split"] for row in report["tasks"].values()) > 0  # the fix is exercised on every profile
    assert report["scores"]["outputs"] == 3 * 24 == report["scores"]["agree"]
    assert report["opencompass_version"] == parity.REFERENCE_VERSION
    assert set(report["data_files"]) == {p.name for p in data.iterdir()}
    assert all(name.endswith(f"_4k{'_rawprompt' if render == 'raw' else ''}.py") for name in report["config_files"])
    assert (out / "parity.md").read_text(encoding="utf-8").startswith("# Parity with OpenCompass")


def test_parity_fails_naming_the_cell_when_a_needle_moves_one_token(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our generator with its first needle one token later than it places it: the check fails, names that cell."""
    from needlebench.tasks.sparse import retrieval

    placed = retrieval.safe_boundary
    calls = {"n": 0}

    def one_later(hay, k, tokens):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        at = placed(hay, k, tokens)
        return at + 1 if calls["n"] == 1 else at

    monkeypatch.setattr(retrieval, "safe_boundary", one_later)
    out = tmp_path / "parity"
    code = main(["parity", str(data), "--profile", "v2", "--tasks", "srt", "-o", str(out), "--quiet"])
    report = json.loads((out / "parity.json").read_text(encoding="utf-8"))
    assert code == 1 and not report["passed"]
    (bad,) = report["unattributed"]
    assert (bad["task"], bad["lang"], bad["tag"]) == ("srt", "en", "UNATTRIBUTED")
    assert bad["cell"] == "length 1000, depth 0, position End, repeat 0"
    assert "UNATTRIBUTED: srt en length 1000, depth 0" in (out / "parity.md").read_text(encoding="utf-8")


def test_parity_names_another_opencompass_version(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user with another OpenCompass gets the version and the module digest in the report, not a silent pass."""
    import opencompass

    monkeypatch.setattr(opencompass, "__version__", "0.6.0")
    report = parity.check_parity(data, "v1", "4k", tasks=("srt",))
    assert report.opencompass_version == "0.6.0" and len(report.modules_digest) == 64
    assert any("installed OpenCompass 0.6.0, not 0.5.4" in n for n in report.notes)
    assert "installed OpenCompass 0.6.0" in report.markdown()


def test_parity_command_runs_as_a_program_and_refuses_bad_input(data: Path, tmp_path: Path) -> None:
    """The entry point users call; a missing folder or a raw render under v2 is one message, exit 2."""
    args = [sys.executable, "-m", "needlebench.commands.cli", "parity"]
    run = subprocess.run(
        [*args, str(data), "--tasks", "srt", "-o", str(tmp_path), "--quiet"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "passed:" in run.stdout and (tmp_path / "parity.json").is_file()
    missing = subprocess.run([*args, str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    raw_v2 = subprocess.run([*args, str(data), "--profile", "v2", "--render", "raw"], capture_output=True, text=True)
    assert raw_v2.returncode == 2 and "raw-prompt configs for the v1 suites only" in raw_v2.stderr


def test_a_run_beside_a_passing_parity_proof_is_marked_checked(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proof written into a work dir marks its leaderboard rows "checked against OpenCompass on these files",
    the bundle records the link and ``needlebench verify`` checks it; once a data file changes, it holds no more."""
    import shutil

    from test_leaderboard import _sparse_suite

    from needlebench.report.bundle import verify_bundle, write_bundle
    from needlebench.report.leaderboard import build_leaderboard
    from needlebench.report.parity_link import CHECKED

    files = tmp_path / "here" / "data" / "needlebench"
    shutil.copytree(data, files)
    monkeypatch.chdir(tmp_path / "here")  # ./data/needlebench: the files this machine reads for the run
    run = tmp_path / "run4k"
    _sparse_suite(run, "strong", 0.9, 1, suite="4k")  # v2 records on OpenCompass's haystack files
    assert main(["parity", str(files), "--profile", "v2", "--tasks", "srt", "-o", str(run), "--quiet"]) == 0

    def notes() -> set[str]:
        return {r.comparability.text for b in build_leaderboard([run], published=False).boards for r in b.rows}

    assert notes() and all(CHECKED in n and "v2 4k, prompt, OpenCompass 0.5.4" in n for n in notes())
    bundle = write_bundle(run, tmp_path / "summary")
    link = json.loads(bundle.read_text(encoding="utf-8"))["parity"]
    assert link["checked"] and link["file"] == "../parity.json" and link["same_files"]
    assert verify_bundle(bundle, run).ok

    with (files / "needles.jsonl").open("a", encoding="utf-8") as fh:  # the data changed after the proof
        fh.write("\n")
    assert not any(CHECKED in n for n in notes())
    failures = verify_bundle(bundle, run).failures
    assert failures == [
        "parity: the bundle says checked against OpenCompass on these files; here: other files: needles.jsonl"
    ]
