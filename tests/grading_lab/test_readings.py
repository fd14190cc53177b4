"""Judges' readings kept on file: a recording replays exactly what the judge said, refuses what it was never
asked, and stands in for a judge only where the judge's folder is missing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.grading.judges import Judge, default_judge
from app.grading.pairjudge import MANIFEST
from grading_lab import readings
from grading_lab.decision_fit import fold_judge


class CountingJudge:
    """A stand-in judge whose readings depend on the text, and which counts what it is asked."""

    def __init__(self, manifest: dict[str, Any] | None = None) -> None:
        self.manifest = manifest or {"recipe": {"seed": 13}, "data": {"x": "ab12"}}
        self.version = "pair-judge-test@000000000000"
        self.asked = 0

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        self.asked += len(triples)
        rows = [[(len(a) % 7) / 10 + 1 / 3, 0.1 + len(r) % 3 / 100, len(q) / 1000] for q, r, a in triples]
        return np.array(rows, dtype=np.float32)


TRIPLES = [("What does a barrier do?", "All ranks wait until every rank reaches it", "everyone waits"),
           ("What does a barrier do?", "All ranks wait until every rank reaches it", "nothing at all, ünïcode ✓"),
           ("Why set_epoch?", "to reshuffle", "everyone waits")]


@pytest.fixture
def readings_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "readings"
    monkeypatch.setattr(readings, "READINGS_DIR", folder)
    return folder


def test_a_recording_replays_every_reading_exactly(tmp_path: Path) -> None:
    live = CountingJudge()
    recording = readings.RecordingJudge(live)
    first = recording.probabilities(TRIPLES[:2])
    second = recording.probabilities(TRIPLES[1:])
    path = tmp_path / "r.json.gz"
    readings.save(recording, path, encoder_sha256="cafe")
    replay = readings.load(path, "tutor models train-judge --crossfit")
    assert replay.manifest == live.manifest and replay.version == live.version
    np.testing.assert_array_equal(replay.probabilities(TRIPLES[:2]), first)
    np.testing.assert_array_equal(replay.probabilities(TRIPLES[1:]), second)
    assert replay.probabilities([]).shape == (0, 3)
    # the same readings make the same bytes, so recording again changes no committed file
    again = tmp_path / "again.json.gz"
    readings.save(recording, again, encoder_sha256="cafe")
    assert again.read_bytes() == path.read_bytes()


def test_a_reading_never_recorded_stops_the_fit_with_the_command_that_trains_the_judge(tmp_path: Path) -> None:
    recording = readings.RecordingJudge(CountingJudge())
    recording.probabilities(TRIPLES[:1])
    path = tmp_path / "r.json.gz"
    readings.save(recording, path)
    replay = readings.load(path, "tutor models train-judge --crossfit --late")
    with pytest.raises(readings.MissingReading, match="train-judge --crossfit --late"):
        replay.probabilities(TRIPLES[:2])


def test_a_recording_in_another_format_is_refused(tmp_path: Path) -> None:
    recording = readings.RecordingJudge(CountingJudge())
    path = tmp_path / "r.json.gz"
    readings.save(recording, path)
    import gzip

    doc = json.loads(gzip.decompress(path.read_bytes()))
    path.write_bytes(gzip.compress(json.dumps({**doc, "format": 99}).encode()))
    with pytest.raises(SystemExit, match="another format"):
        readings.load(path, "tutor models train-judge --crossfit")


def test_the_judge_itself_comes_before_its_recording(tmp_path: Path, readings_dir: Path) -> None:
    folder = tmp_path / "fold-0"
    live = CountingJudge()
    assert readings.kept_judge(folder, "crossfit-pair-0", lambda _: live, "train it", record=False) is None
    # a recording, and no judge: the recording
    recording = readings.RecordingJudge(live)
    recording.probabilities(TRIPLES)
    readings.save_all({"crossfit-pair-0": recording, "not-recording": live})
    assert sorted(p.name for p in readings_dir.iterdir()) == ["crossfit-pair-0.json.gz"]
    kept = readings.kept_judge(folder, "crossfit-pair-0", lambda _: live, "train it", record=False)
    assert isinstance(kept, readings.ReplayJudge)
    with pytest.raises(SystemExit, match="--record needs the judges themselves"):
        readings.kept_judge(folder, "crossfit-pair-0", lambda _: live, "train it", record=True)
    # the judge and a recording: the judge, recorded on request
    folder.mkdir()
    (folder / MANIFEST).write_text("{}", encoding="utf-8")
    assert readings.kept_judge(folder, "crossfit-pair-0", lambda _: live, "train it", record=False) is live
    recorded = readings.kept_judge(folder, "crossfit-pair-0", lambda _: live, "train it", record=True)
    assert isinstance(recorded, readings.RecordingJudge) and recorded.inner is live


def test_a_recording_of_a_judge_made_otherwise_is_refused(tmp_path: Path, readings_dir: Path) -> None:
    """The decision's fit checks a replayed fold judge's recorded manifest as it checks a live one's (no fold
    judges in tmp_path)."""
    shipped: Judge = default_judge()
    other = CountingJudge({**shipped.manifest, "recipe": {**shipped.manifest["recipe"], "crossfit": 0,
                                                          "epochs": 99}})
    readings.save_all({"crossfit-pair-0": readings.RecordingJudge(other)})
    with pytest.raises(SystemExit, match="not made like the shipped judge"):
        fold_judge(tmp_path, 0, shipped, "")
    with pytest.raises(SystemExit, match=r"no cross-fitted judge .* no recording"):
        fold_judge(tmp_path, 1, shipped, "")
    same = CountingJudge({**shipped.manifest, "recipe": {**shipped.manifest["recipe"], "crossfit": 0}})
    readings.save_all({"crossfit-pair-0": readings.RecordingJudge(same)})
    assert isinstance(fold_judge(tmp_path, 0, shipped, ""), readings.ReplayJudge)


@pytest.mark.slow
def test_recorded_fold_judges_give_the_fit_the_inputs_the_judges_gave(
        tmp_path: Path, readings_dir: Path, monkeypatch: pytest.MonkeyPatch, served_late_judge: Judge) -> None:
    """`decision_fit.record` on fold judges made like the shipped ones (copies of them, standing in for the
    cross-fitted judges, which are slow to train): replaying the recordings gives the decision's
    fit the same rows, bit for bit, as the judges themselves, for the decision and the bank decision."""
    import shutil
    from functools import partial

    from app.config import JUDGE_DIR, LATE_JUDGE_DIR
    from app.grading import Graders
    from grading_lab import decision_fit
    from grading_lab.evaluation import MemoEncoder, bank_rubrics
    from grading_lab.judge_train import DECISION_ANSWERS
    from ingest.embedder import SentenceTransformerEncoder

    def fold_copy(source: Path, target: Path) -> Path:
        shutil.copytree(source, target)
        manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        manifest["recipe"]["crossfit"] = 0
        (target / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        return target

    pair_dir = fold_copy(JUDGE_DIR, tmp_path / "pair" / "fold-0")
    late_dir = fold_copy(LATE_JUDGE_DIR, tmp_path / "late" / "fold-0")
    monkeypatch.setattr(decision_fit, "CROSSFIT_DIR", pair_dir.parent)
    monkeypatch.setattr(decision_fit, "LATE_CROSSFIT_DIR", late_dir.parent)
    monkeypatch.setattr(decision_fit, "DECISION_ANSWERS", DECISION_ANSWERS[:1])
    monkeypatch.setattr(decision_fit, "offline_late_judge", lambda: served_late_judge)
    monkeypatch.setattr(decision_fit, "encoder_sha256", lambda: "test-export")
    late_fold = CountingJudge(json.loads((late_dir / MANIFEST).read_text(encoding="utf-8")))
    late_fold.probabilities = served_late_judge.probabilities  # type: ignore[method-assign]
    loaded = {pair_dir: decision_fit.load_judge(pair_dir), late_dir: late_fold}
    monkeypatch.setattr(decision_fit, "load_judge", lambda folder: loaded[folder])

    encoder = MemoEncoder(SentenceTransformerEncoder())
    written = decision_fit.record(encoder)
    assert sorted(p.name for p in written) == ["crossfit-late-0.json.gz", "crossfit-pair-0.json.gz"]

    rubrics = bank_rubrics(encoder)
    path, keep = DECISION_ANSWERS[0], partial(decision_fit._in_fold, 0)
    live = decision_fit.dataset(path, encoder, Graders(judge=loaded[pair_dir], late=late_fold), keep=keep,
                                rubrics=rubrics)
    shutil.rmtree(tmp_path / "pair")
    shutil.rmtree(tmp_path / "late")
    pair = decision_fit.fold_judge(pair_dir.parent, 0, default_judge(), "")
    late = decision_fit.fold_judge(late_dir.parent, 0, served_late_judge, " --late")
    assert isinstance(pair, readings.ReplayJudge) and isinstance(late, readings.ReplayJudge)
    replayed = decision_fit.dataset(path, encoder, Graders(judge=pair, late=late), keep=keep, rubrics=rubrics)
    assert len(live.y) > 20 and live.xb is not None and replayed.xb is not None
    np.testing.assert_array_equal(replayed.x, live.x)
    np.testing.assert_array_equal(replayed.xb, live.xb)


def test_recording_with_no_slow_judges_here_says_so_and_writes_nothing(
        tmp_path: Path, readings_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from grading_lab import decision_fit, foreign_fit

    monkeypatch.setattr(foreign_fit, "holdout_dir", lambda fold: tmp_path / f"holdout{fold}")
    foreign_fit.main(["--record"])
    assert "no held-out judge here to record" in capsys.readouterr().out
    monkeypatch.setattr(decision_fit, "CROSSFIT_DIR", tmp_path / "pair")
    monkeypatch.setattr(decision_fit, "LATE_CROSSFIT_DIR", tmp_path / "late")
    monkeypatch.setattr(decision_fit, "bank_rubrics", lambda encoder: {})
    assert decision_fit.record(encoder=None) == []  # type: ignore[arg-type]
    assert not readings_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("bank", [False, True], ids=["decision", "bank decision"])
def test_the_decisions_refit_from_the_recorded_readings_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served_late_judge: Judge, bank: bool) -> None:
    """With no cross-fitted judge here (they are slow to train), the decisions' fits replay the committed
    recordings. Their grouped CV is the one decision.json and bank_decision.json record (fitted over the same
    recordings), within 0.005: the shipped judges' own readings of the dev set, read live, differ in their last
    digits from one CPU to another."""
    from app.grading.decision import BANK_DECISION_PATH, DECISION_PATH
    from grading_lab import decision_fit
    from ingest.embedder import SentenceTransformerEncoder

    monkeypatch.setattr(decision_fit, "CROSSFIT_DIR", tmp_path / "pair")
    monkeypatch.setattr(decision_fit, "LATE_CROSSFIT_DIR", tmp_path / "late")
    monkeypatch.setattr(decision_fit, "offline_late_judge", lambda: served_late_judge)
    data = decision_fit.labelled(list(decision_fit.DEFAULT_FILES), SentenceTransformerEncoder(), bank)
    figures = decision_fit.crossval(data, bank=bank)
    path = BANK_DECISION_PATH if bank else DECISION_PATH
    recorded = json.loads(path.read_text(encoding="utf-8"))["grouped_cv"]
    assert figures["n"] == recorded["n"]
    assert figures["macro_f1_3"] == pytest.approx(recorded["macro_f1_3"], abs=0.005)
    assert figures["macro_f1_2"] == pytest.approx(recorded["macro_f1_2"], abs=0.005)


@pytest.mark.slow
def test_the_foreign_head_refits_from_the_recorded_readings_alone(tmp_path: Path) -> None:
    """With neither held-out judge here, the foreign head's fit replays both committed recordings, and its
    grouped CV is the one foreign.json records (fitted over the same recordings), within 0.005: the shipped
    judge's live readings of SciEntsBank and the dev set differ in their last digits from one CPU to another."""
    from app.grading.foreign import FOREIGN_PATH
    from grading_lab import foreign_fit, heldout
    from ingest.embedder import SentenceTransformerEncoder

    judges = {fold: heldout.heldout_judge(fold, tmp_path / f"holdout{fold}") for fold in heldout.HOLDOUTS}
    assert all(isinstance(judge, readings.ReplayJudge) for judge in judges.values())
    figures = foreign_fit.figures(foreign_fit.simulate_sets(SentenceTransformerEncoder(), judges))
    recorded = json.loads(FOREIGN_PATH.read_text(encoding="utf-8"))["figures"]
    assert figures["answers"] == recorded["answers"]
    for part in ("grouped_cv", "grouped_cv_3way"):
        for name, value in recorded[part].items():
            assert figures[part][name] == pytest.approx(value, abs=0.005), (part, name)


@pytest.mark.slow
def test_the_example_head_refits_from_the_recorded_readings_alone(tmp_path: Path) -> None:
    """With no held-out judge here, the example head's fit replays the committed recordings of Beetle's held-out
    questions, and its grouped CV is the one examples.json records, within 0.005 (the shipped judge's live
    readings of SciEntsBank and the dev set differ in their last digits from one CPU to another)."""
    from app.grading.examples import EXAMPLES_PATH
    from grading_lab import examples_fit, heldout
    from ingest.embedder import SentenceTransformerEncoder

    judges = {fold: heldout.heldout_judge(fold, tmp_path / f"holdout{fold}") for fold in heldout.HOLDOUTS}
    assert all(isinstance(judge, readings.ReplayJudge) for judge in judges.values())
    sims = examples_fit.simulate_sets(SentenceTransformerEncoder(), judges=judges)
    figures = examples_fit.grouped_cv(sims).to_dict()
    recorded = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))["figures"]
    assert figures["rows"] == recorded["rows"]
    for part in ("grouped_cv", "grouped_cv_3way"):
        for name, value in recorded[part].items():
            assert figures[part][name] == pytest.approx(value, abs=0.005), (part, name)
