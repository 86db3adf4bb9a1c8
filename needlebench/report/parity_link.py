"""A run's link to a parity proof: the ``parity.json`` that ``needlebench parity`` wrote beside it.

A run is *checked against OpenCompass on these files* when a passing ``parity.json`` lies in its run folder or
its work dir, was made with the OpenCompass installed here, under a profile the run's samples use, and names
the same data files this machine reads for the run (each OpenCompass data file it lists hashes here as it did
there, the haystack files the run's samples name among them). The results bundle records the link; the
leaderboard's comparability note and ``needlebench verify`` read it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ..context.corpora import find_opencompass_file
from ..record import GradedSample
from .comparability import REFERENCE_CORPUS

__all__ = ["CHECKED", "PARITY_FILE", "ParityLink", "file_digest", "find_parity_link", "installed_version"]

PARITY_FILE = "parity.json"
CHECKED = "checked against OpenCompass on these files"


@dataclass(frozen=True)
class ParityLink:
    """What a run's ``parity.json`` says and whether it holds for the run.

    Args:
        file: the file, relative to the run folder (``parity.json`` or ``../parity.json``).
        sha256: its digest.
        passed: the check passed (no unattributed byte, no score disagreement).
        opencompass_version: the OpenCompass it was run with.
        profile: its profile; suite and render: what it compared.
        suite: the suite it sampled.
        render: ``prompt`` or ``raw``.
        same_files: every data file it lists hashes here as there, and it lists the run's haystack files.
        checked: all of it holds: the run may be called checked against OpenCompass on these files.
        why: what does not hold, in a few words (empty when checked).
    """

    file: str
    sha256: str
    passed: bool
    opencompass_version: str
    profile: str
    suite: str
    render: str
    same_files: bool
    checked: bool
    why: str = ""

    @property
    def text(self) -> str:
        """The note a leaderboard row carries: ``checked against ... (v1 4k, prompt, OpenCompass 0.5.4)``."""
        what = f"{self.profile} {self.suite}, {self.render}, OpenCompass {self.opencompass_version}"
        return f"{CHECKED} ({what})" if self.checked else f"parity not shown: {self.why}"

    def to_dict(self) -> dict[str, Any]:
        """The link as the bundle stores it."""
        return asdict(self)


def installed_version(dist: str) -> str | None:
    """An installed distribution's version, None where it is not installed.

    Args:
        dist: the distribution's name (``opencompass``).
    """
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def file_digest(path: Path) -> str:
    """A data file's SHA-256: what ``parity.json`` records and a run's link compares on this machine.

    Args:
        path: the file.
    """
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_parity_link(runs: Sequence[Path], records: Sequence[GradedSample]) -> ParityLink | None:
    """The parity proof beside a run, checked against the run's samples and this machine's files.

    Args:
        runs: the run folders (a work dir's timestamped runs, or one run).
        records: the run's graded samples (their ``profile`` and ``corpus``).

    Returns:
        The link, or None where no ``parity.json`` lies in a run folder or its work dir.
    """
    found = next(
        ((run, path) for run in runs for path in (run / PARITY_FILE, run.parent / PARITY_FILE) if path.is_file()),
        None,
    )
    if found is None:
        return None
    run, path = found
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    rel = PARITY_FILE if path.parent == run else f"../{PARITY_FILE}"
    try:
        data = json.loads(raw)
    except ValueError:
        return ParityLink(rel, digest, False, "", "", "", "", False, False, "not JSON")
    listed: dict[str, str] = dict(data.get("data_files") or {})
    mismatched = []
    for name, digest in listed.items():
        here = find_opencompass_file(name)
        if here is None or file_digest(here) != digest:
            mismatched.append(name)
    used = {
        name
        for r in records
        if str(r.get("corpus") or "").startswith(REFERENCE_CORPUS)
        for name in str(r.fields["corpus"])[len(REFERENCE_CORPUS) :].split("+")
    }
    unlisted = sorted(n for n in used if n not in listed)
    profiles = {str(r.get("profile") or "v2") for r in records}
    version = str(data.get("opencompass_version") or "")
    installed = installed_version("opencompass")
    why = []
    if not data.get("passed"):
        why.append("the parity check failed")
    if version != installed:
        why.append(f"made with OpenCompass {version}, {installed} here")
    if data.get("profile") not in profiles:
        why.append(f"checked profile {data.get('profile')}, the run's samples are {sorted(profiles)}")
    if not used:
        why.append("the run's samples do not read OpenCompass's files")
    if mismatched or unlisted:
        why.append(f"other files: {', '.join(sorted(mismatched) + unlisted)}")
    return ParityLink(
        file=rel,
        sha256=digest,
        passed=bool(data.get("passed")),
        opencompass_version=version,
        profile=str(data.get("profile") or ""),
        suite=str(data.get("suite") or ""),
        render=str(data.get("render") or ""),
        same_files=not (mismatched or unlisted) and bool(used),
        checked=not why,
        why="; ".join(why),
    )
