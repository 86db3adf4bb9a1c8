"""Full disks, on a real size-limited file system (a tmpfs the test mounts): one message naming the file,
nothing half-written that a later run would trust, and a resume that redoes only what was lost."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from needlebench.errors import OutOfSpace
from needlebench.files import atomic_write
from needlebench.runfolder.pieces import repair_predictions


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards. Mounting needs root, which CI and the setup script run as."""
    mount = tmp_path / "small"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_write_that_fills_the_disk_names_the_file_and_keeps_nothing(small_fs: Path) -> None:
    target = small_fs / "report.html"
    with pytest.raises(OutOfSpace) as err:
        with atomic_write(target) as tmp:
            tmp.write_bytes(b"x" * 2_000_000)
    message = str(err.value)
    assert str(target) in message and "no space left" in message and "bytes free" in message
    assert list(small_fs.iterdir()) == []  # neither the target nor the temporary file


def test_a_full_dataset_cache_stops_the_build_then_builds_the_same_rows(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No silent fallback to rows in memory (a 1000k suite does not fit there): the build stops with the
    message; once there is room, the rows are the ones a roomy cache gives."""
    from needlebench.cache.rows import load_rows

    params = dict(lang="en", lengths=[32000], depths=[0, 50, 100], repeats=4)  # ~1.5 MB of prompts: over 1 MiB
    monkeypatch.setenv("NEEDLEBENCH_CACHE", str(small_fs))
    with pytest.raises(OutOfSpace, match="no space left"):
        load_rows("srt", **params)
    leftovers = [p for p in small_fs.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []  # nothing a later run could mistake for a finished file
    monkeypatch.setenv("NEEDLEBENCH_CACHE", str(tmp_path / "roomy"))
    rows = load_rows("srt", **params)
    assert len(rows) == 12 and all(json.loads(m)["prompt_tokens"] <= 32000 for m in rows["meta"])


def test_prediction_files_cut_short_are_not_trusted_on_resume(tmp_path: Path) -> None:
    """What a full disk leaves in OpenCompass's prediction folder: a final file cut mid-dump (OpenCompass would
    skip its task, then fail evaluating it) and a jsonl whose last line was cut (it would discard every line)."""
    folder = tmp_path / "predictions" / "m"
    folder.mkdir(parents=True)
    whole = {"0": {"prediction": "a"}, "1": {"prediction": "b"}}
    (folder / "done.json").write_text(json.dumps(whole))
    (folder / "cut.json").write_text(json.dumps(whole)[:-7])
    lines = [json.dumps({"idx": i, "prediction": f"p{i}"}) for i in range(3)]
    (folder / "tmp_part.jsonl").write_text("\n".join(lines) + '\n{"idx": 3, "predic')
    (folder / "tmp_whole.jsonl").write_text("\n".join(lines) + "\n")
    (folder / ".part.json.part").write_text('{\n    "0": {')  # the file a killed task of ours was writing
    notes = repair_predictions(folder)
    assert len(notes) == 3 and not (folder / ".part.json.part").exists()
    assert not (folder / "cut.json").exists() and json.loads((folder / "done.json").read_text()) == whole
    assert (folder / "tmp_part.jsonl").read_text() == "\n".join(lines) + "\n"  # the 3 whole predictions kept
    assert (folder / "tmp_whole.jsonl").read_text() == "\n".join(lines) + "\n"
    assert repair_predictions(folder) == []  # nothing left to repair
