"""Export: byte-identical across processes, full rows, no partial file on error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import bin_path

CONFIG = "tests/configs/export_small.py"


def _export(root: Path, out: Path, config: str = CONFIG) -> subprocess.CompletedProcess:
    return subprocess.run(
        [bin_path("needlebench"), "export", config, "-o", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_is_byte_identical_across_processes(root: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ra, rb = _export(root, a), _export(root, b)
    assert ra.returncode == 0, ra.stderr
    assert rb.returncode == 0, rb.stderr
    assert a.read_bytes() == b.read_bytes()
    rows = [json.loads(x) for x in a.read_text(encoding="utf-8").splitlines()]
    # 2 tasks x 2 langs; srt: 2 lengths x 5 depths x 2 repeats; mrt: 2 lengths x 2 repeats
    assert len(rows) == 2 * (2 * 5 * 2) + 2 * (2 * 2)
    first = rows[0]
    assert set(first) == {"dataset", "id", "task", "lang", "prompt", "gold", "meta"}
    for key in ("length", "depth", "prompt_tokens", "buffer", "needles", "corpus", "seed", "repeat"):
        assert key in first["meta"], key
    assert {r["task"] for r in rows} == {"srt", "mrt"}
    assert {r["lang"] for r in rows} == {"en", "zh"}
    assert len({r["id"] for r in rows}) == len(rows)
    mrt = next(r for r in rows if r["task"] == "mrt")
    assert "depths" in mrt["meta"] and len(mrt["gold"]["needles"]) == len(mrt["meta"]["depths"])


def test_export_bad_config_leaves_no_file(root: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "_base_ = []\nfrom needlebench.opencompass.configs import needlebench_datasets\n"
        "datasets = needlebench_datasets(suite='4k', tasks=['srt'], langs=['en'], depths=[0, 150])\n"
    )
    out = tmp_path / "out.jsonl"
    result = _export(root, out, str(bad))
    assert result.returncode == 2
    assert "depths" in result.stderr and "150" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert not list(tmp_path.glob("out.jsonl*"))
