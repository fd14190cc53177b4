"""Judges' readings kept in the repository, so that a fit over judges that are slow to train can run again in
minutes.

The learned decisions are fitted over the cross-fitted judges' readings of the decision's written answers
(`grading_lab/decision_fit.py`), and the foreign and example heads over the held-out judges' readings of
Beetle's answers (`grading_lab/heldout.py`; `python -m grading_lab.foreign_fit --record` records both heads'
readings). Those judges are not shipped, and training them takes about an hour and three
quarters on 2 cores (six judges, one at a time). A change to what reads the readings (a check, a decision
input, a rule) leaves the readings as they are, so `--record` (on either fit) writes every reading the fit
asks of each such judge present into `data/train/readings/`, with the judge's manifest, and a later fit
without the judges' folders replays them: the same figures and weights, bit for bit, as long as the fit asks
the judges for nothing they were not asked then.

A replayed judge answers only what was recorded: a triple it never read (an answer's text changed by a new
check, a new reading asked for) stops the fit with the command that trains the judge, and so does a
recording from judges made otherwise than the shipped judge's recipe and data (the callers check the
recorded manifest as they check a live judge's). The late judges read the int8 encoder's states, whose last
digits differ from one CPU to another; a recording keeps the readings of the machine that made it, and
names that encoder's hash.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR
from app.grading.judges import Judge
from app.grading.pairjudge import MANIFEST

READINGS_DIR = DATA_DIR / "train" / "readings"
FORMAT = 1

Triple = tuple[str, str, str]


class MissingReading(LookupError):
    """A replayed judge was asked for a triple it never read."""


class RecordingJudge:
    """A live judge that keeps every reading it gives."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.manifest = inner.manifest
        self.version = inner.version
        self.readings: dict[Triple, np.ndarray] = {}

    def probabilities(self, triples: Sequence[Triple]) -> np.ndarray:
        out = np.asarray(self.inner.probabilities(triples), dtype=np.float32)
        for triple, row in zip(triples, out, strict=True):
            self.readings[tuple(triple)] = row  # type: ignore[index]
        return out


class ReplayJudge:
    """A judge's recorded readings, answered as the judge answered them."""

    def __init__(self, manifest: dict[str, Any], version: str, readings: dict[Triple, np.ndarray], source: Path,
                 retrain: str) -> None:
        self.manifest = manifest
        self.version = version
        self.readings = readings
        self.source = source
        self.retrain = retrain

    def probabilities(self, triples: Sequence[Triple]) -> np.ndarray:
        rows = []
        for triple in triples:
            row = self.readings.get(tuple(triple))  # type: ignore[arg-type]
            if row is None:
                raise MissingReading(
                    f"{self.source} holds no reading of answer {triple[2][:60]!r} against {triple[1][:60]!r}: what the "
                    f"fit asks of the judges has changed since it was recorded; train the judges (`{self.retrain}`) "
                    f"and record again with --record")
            rows.append(row)
        return np.array(rows, dtype=np.float32).reshape(len(rows), 3)


def save(judge: RecordingJudge, path: Path, encoder_sha256: str | None = None) -> None:
    """Write a recording judge's readings (strings once each; probabilities as float32, exactly)."""
    strings: dict[str, int] = {}
    index = lambda s: strings.setdefault(s, len(strings))  # noqa: E731
    triples = sorted(judge.readings)
    rows = [[index(q), index(r), index(a)] for q, r, a in triples]
    probs = np.stack([judge.readings[t] for t in triples]).astype("<f4") if triples else np.zeros((0, 3), "<f4")
    doc = {"format": FORMAT, "version": judge.version, "manifest": judge.manifest, "encoder_sha256": encoder_sha256,
           "strings": list(strings), "triples": rows,
           "probabilities": base64.b64encode(probs.tobytes()).decode("ascii")}
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same readings make the same bytes, so a recording that changed nothing shows no diff.
    path.write_bytes(gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8"), mtime=0))


def load(path: Path, retrain: str) -> ReplayJudge:
    """A recording written by `save`, as a judge."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    if doc.get("format") != FORMAT:
        raise SystemExit(f"{path} is in another format than this code reads; record it again (`{retrain}`, then "
                         f"the fit with --record)")
    strings = doc["strings"]
    probs = np.frombuffer(base64.b64decode(doc["probabilities"]), dtype="<f4").reshape(-1, 3)
    readings = {(strings[q], strings[r], strings[a]): probs[n] for n, (q, r, a) in enumerate(doc["triples"])}
    return ReplayJudge(doc["manifest"], doc["version"], readings, path, retrain)


def kept_judge(folder: Path, name: str, live: Callable[[Path], Judge], retrain: str, record: bool) -> Judge | None:
    """The judge trained into `folder` when it is there (recording its readings when `record`), or else its
    readings recorded as `name` in READINGS_DIR, replayed; None when there are neither. The caller checks
    that what it gets was made as it should be (its `manifest`)."""
    if (folder / MANIFEST).is_file():
        judge = live(folder)
        return RecordingJudge(judge) if record else judge
    path = READINGS_DIR / f"{name}.json.gz"
    if path.is_file():
        if record:
            raise SystemExit(f"--record needs the judges themselves: no judge in {folder} (run `{retrain}`)")
        return load(path, retrain)
    return None


def save_all(judges: dict[str, Judge], encoder_sha256: str | None = None) -> list[Path]:
    """Write the readings of every recording judge among `judges` (by name); the paths written."""
    written = []
    for name, judge in sorted(judges.items()):
        if isinstance(judge, RecordingJudge):
            path = READINGS_DIR / f"{name}.json.gz"
            save(judge, path, encoder_sha256)
            written.append(path)
    return written
