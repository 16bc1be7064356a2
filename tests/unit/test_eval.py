"""`verl-recipe eval`: the validation-only launch made from a run's own launch, the comparison of two validations
(verl's metric line, the per-sample dump with its interval), and the whole path over a stand-in verl that trains,
saves and validates as verl 0.8.0 does (its file logger, its dump, resume_mode)."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl_recipe.cli import evaluate as eval_cli
from verl_recipe.contracts import runfiles
from verl_recipe.evaluation import score
from verl_recipe.evaluation.launches import BASE, TRAINED, Subject, eval_launch
from verl_recipe.evaluation.run import Plan, evaluate, plan
from verl_recipe.hydra_check import compose_launch, hydra_available, select
from verl_recipe.hydra_syntax import override_key
from verl_recipe.render import RUNTIME_ENV_PREFIX
from verl_recipe.run.record import METRICS_ENV

from tests.golden.corpus import cli
from tests.unit.fixtures import install_fake_verl, make_shared, set_args

TRAIN_ARGV = [
    "python3", "-m", "verl.trainer.main_ppo",
    "trainer.val_before_train=False", "trainer.resume_mode=auto", "actor_rollout_ref.model.path=/m/base",
    f"{RUNTIME_ENV_PREFIX}{METRICS_ENV}='/runs/x/metrics.jsonl'", "data.val_files=/d/test.parquet",
    "+trainer.val_only=False",
]  # fmt: skip


def keys_of(argv: list[str]) -> list[str]:
    return [override_key(a) for a in argv if "=" in a]


@pytest.mark.parametrize(
    "subject",
    [Subject(BASE, "/m/base"), Subject(TRAINED, "/m/base", save="/c/p/e/global_step_7"), Subject(TRAINED, "/exp/7")],
)
def test_the_eval_launch_replaces_each_key_once_and_keeps_the_rest(tmp_path: Path, subject: Subject) -> None:
    argv, env = eval_launch(TRAIN_ARGV, {"A": "1"}, subject, tmp_path / "out", ["/v/a.parquet", "/v/b.parquet"])
    keys = keys_of(argv)
    assert len(keys) == len(set(keys)), "Hydra refuses a key given twice"
    got = dict(a.split("=", 1) for a in argv if "=" in a)
    bare = {override_key(k): v for k, v in got.items()}
    assert bare["trainer.val_only"] == bare["trainer.val_before_train"] == "True"
    assert bare["actor_rollout_ref.model.path"] == subject.model_path
    if subject.save:
        assert bare["trainer.resume_mode"] == "resume_path" and bare["trainer.resume_from_path"] == subject.save
        assert subject.step == 7
    else:
        assert bare["trainer.resume_mode"] == "disable" and subject.step == 0
    metrics = str(tmp_path / "out" / "metrics.jsonl")
    assert bare[f"{RUNTIME_ENV_PREFIX.lstrip('+')}{METRICS_ENV}"] == f"'{metrics}'" and env[METRICS_ENV] == metrics
    assert bare["data.val_files"] == "['/v/a.parquet','/v/b.parquet']" and env["A"] == "1"
    assert argv[:3] == TRAIN_ARGV[:3]


@pytest.mark.skipif(not hydra_available(), reason="verl's config is not installed")
def test_the_eval_overrides_compose_with_verls_own_config(tmp_path: Path) -> None:
    """Every key the eval sets exists in verl 0.8.0's trainer config with the meaning used (Hydra composes it)."""
    save = Subject(TRAINED, "/m/base", save="/c/p/e/global_step_7")
    argv, _ = eval_launch(TRAIN_ARGV[3:6], {}, save, tmp_path, None)
    cfg, error = compose_launch(argv)
    assert error is None, error
    assert select(cfg, "trainer.val_only") is True and select(cfg, "trainer.val_before_train") is True
    assert select(cfg, "trainer.resume_from_path") == save.save
    assert select(cfg, "trainer.validation_data_dir") == str(tmp_path / "generations")


def test_a_data_source_may_hold_slashes() -> None:
    assert score.split_key("val-core/openai/gsm8k/acc/mean@1") == ("openai/gsm8k", "acc", "mean@1")
    assert score.split_key("val-aux/openai/gsm8k/acc/mean@1") is None
    assert score.split_key("val-core/acc") is None


def test_samples_are_placed_by_walking_the_rows_across_repeats_and_dropped_rows() -> None:
    rows = [("a", "1"), ("a", "2"), ("b", "3"), ("b", "4"), ("c", "5")]
    samples = [{"gts": g} for g in ("1", "1", "3", "3", "5", "5")]  # n=2, row 2 and 4 dropped (too long)
    assert score.sources_of(samples, rows) == ["a", "a", "b", "b", "c", "c"]
    assert score.sources_of([{"gts": "9"}], rows) is None


def test_t_quantiles_match_the_tables() -> None:
    for df, t in ((1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042), (1000, 1.962)):
        assert score.t975(df) == pytest.approx(t, abs=0.01), df


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=60),
    st.floats(-0.5, 0.5, allow_nan=False),
    st.booleans(),
)
def test_the_interval_holds_the_difference_of_means(base: list[float], shift: float, paired: bool) -> None:
    trained = [b + shift for b in base]
    d = score.difference("all", base, trained, paired)
    assert d.difference == pytest.approx(shift, abs=1e-9)
    assert d.low is not None and d.high is not None
    assert d.low - 1e-9 <= d.difference <= d.high + 1e-9
    if paired:  # a constant shift: every per-sample difference equal, the paired interval has no width
        assert d.high - d.low == pytest.approx(0, abs=1e-6)


def test_the_paired_interval_covers_the_true_difference_about_95_in_100() -> None:
    rng = random.Random(5)
    hits, trials = 0, 400
    for _ in range(trials):
        base = [float(rng.random() < 0.4) for _ in range(50)]
        trained = [float(rng.random() < 0.5) if b == 0 else float(rng.random() < 0.9) for b in base]
        d = score.difference("all", base, trained, True)
        true = 0.6 * 0.5 + 0.4 * 0.9 - 0.4
        hits += d.low is not None and d.high is not None and d.low <= true <= d.high
    assert 0.90 <= hits / trials <= 0.99, hits / trials


def test_other_prompts_get_welch_and_unreadable_files_all_samples_only() -> None:
    base = [{"input": f"q{i}", "gts": str(i % 3), "score": float(i % 2)} for i in range(12)]
    trained = [dict(s, input=s["input"] + "!") for s in base]
    diffs, note = score.compare_samples(base, trained, None)
    assert [d.data_source for d in diffs] == [score.ALL] and not diffs[0].paired
    assert "unpaired (Welch)" in note and "could not be read" in note
    std = statistics.stdev([float(i % 2) for i in range(12)])
    assert diffs[0].high is not None and diffs[0].high > 0 and math.isfinite(std)


# ---- the whole path, over a stand-in verl

FAKE_VERL = r"""
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
args = {k.lstrip("+"): v.strip("'") for k, v in args.items()}
metrics = os.environ["VERL_FILE_LOGGER_PATH"]
ckpt = args["trainer.default_local_dir"]
if args.get("trainer.val_only") != "True":
    for step in (1, 2, 3):
        actor = os.path.join(ckpt, f"global_step_{step}", "actor")
        os.makedirs(actor, exist_ok=True)
        json.dump({"FSDP_version": 2, "world_size": 1}, open(os.path.join(actor, "fsdp_config.json"), "w"))
        open(os.path.join(actor, "model_world_size_1_rank_0.pt"), "wb").write(b"w")
        open(os.path.join(ckpt, "latest_checkpointed_iteration.txt"), "w").write(str(step))
    with open(metrics, "w") as f:
        for step in (1, 2, 3):
            f.write(json.dumps({"step": step, "data": {"critic/score/mean": 0.1 * step}}) + "\n")
    sys.exit(0)
if os.environ.get("FAKE_EVAL_FAIL") == args["trainer.resume_mode"]:
    print("Traceback: validation broke"); sys.exit(1)
trained = args["trainer.resume_mode"] == "resume_path"
step = int(args["trainer.resume_from_path"].rsplit("_", 1)[1]) if trained else 0
rows = json.load(open(args["data.val_files"] + ".rows.json"))  # the parquet's rows (this python has no pyarrow)
rows = [r for i, r in enumerate(rows) if i != 3]  # one prompt too long: filter_overlong_prompts drops it
samples = []
for i, r in enumerate(rows):
    for k in range(2):  # val_kwargs.n = 2, repeats in a row
        good = (i % 2 == 0) if trained else (i % 4 == 0)
        samples.append({"input": r["prompt"], "output": "x", "gts": r["reward_model"]["ground_truth"],
                        "score": float(good), "step": step})
out = args["trainer.validation_data_dir"]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"{step}.jsonl"), "w") as f:
    f.writelines(json.dumps(s) + "\n" for s in samples)
by = {}
for s, r in zip(samples, [r for r in rows for _ in range(2)]):
    by.setdefault(r["data_source"], []).append(s["score"])
data = {f"val-core/{ds}/acc/mean@2": sum(v) / len(v) for ds, v in by.items()}
with open(metrics, "w") as f:
    f.write(json.dumps({"step": step, "data": data}) + "\n")
print(f"validated step {step}")
"""


def val_parquet(path: Path) -> None:
    rows = [
        {"data_source": "openai/gsm8k" if i < 6 else "hiyouga/geometry3k", "prompt": f"q{i}",
         "reward_model": {"ground_truth": str(i), "style": "rule"}}
        for i in range(10)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), path)
    path.with_name(path.name + ".rows.json").write_text(json.dumps(rows))


@pytest.fixture
def trained_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    install_fake_verl(tmp_path / "verl", monkeypatch, FAKE_VERL)
    shared = make_shared(tmp_path / "shared", model="qwen3.5-35b-a3b")
    val_parquet(Path(shared["VAL_FILES"]))
    out = cli(capsys, "launch", "qwen3.5-35b-fsdp", "--set", "TOTAL_TRAINING_STEPS=3", *set_args(shared))
    runs = sorted(Path(shared["LOG_DIR"]).rglob("runs/*"))
    assert len(runs) == 1, out
    return runs[0]


def test_eval_scores_the_newest_save_against_the_base_and_the_page_shows_it(
    trained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = plan(trained_run, None, None, None)
    assert isinstance(p, Plan), p
    assert evaluate(p, "tester@here") == 0
    printed = capsys.readouterr()
    result = json.loads((p.out / runfiles.EVAL_RESULT).read_text())
    assert result["trained"]["step"] == 3 and result["trained"]["save"].endswith("global_step_3")
    verl = {(r["data_source"], r["metric"]): r for r in result["verl"]}
    gsm = verl[("openai/gsm8k", "acc/mean@2")]
    # rows 0-5 are gsm8k; row 3 dropped: prompts 0,1,2,4,5 -> trained good at 0,2,4 (3/5), base at 0,4 (2/5)
    assert gsm["base"] == pytest.approx(0.4) and gsm["trained"] == pytest.approx(0.6)
    samples = {d["data_source"]: d for d in result["samples"]}
    assert samples["all"]["n_base"] == samples["all"]["n_trained"] == 18 and samples["all"]["paired"]
    assert samples["openai/gsm8k"]["n_base"] == 10 and samples["hiyouga/geometry3k"]["n_base"] == 8
    assert samples["openai/gsm8k"]["trained"] == pytest.approx(gsm["trained"]), "the dump and verl's line agree"
    assert samples["all"]["low"] <= samples["all"]["difference"] <= samples["all"]["high"]
    assert "openai/gsm8k" in printed.out and "95% CI" in printed.out
    page = (trained_run / runfiles.RUN_PAGE).read_text()
    assert 'id="eval"' in page and "global_step_3" in page and "+0.2000" in page


def test_a_failed_validation_is_named_and_writes_no_result(
    trained_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_EVAL_FAIL", "resume_path")
    p = plan(trained_run, None, None, None)
    assert isinstance(p, Plan), p
    assert evaluate(p, "tester@here") == 1
    err = capsys.readouterr().err
    assert "verl's validation of the trained model exited 1" in err and "validation broke" in err
    assert not (p.out / runfiles.EVAL_RESULT).exists()


def test_bad_requests_are_one_line_each(trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = str(trained_run.parents[3])
    cases: list[tuple[list[str], str]] = [
        (["no-such-run", "--log-dir", log_dir], "no-such-run: is no run under"),
        ([str(trained_run), "--step", "9"], "step 9: no global_step_9"),
        ([str(trained_run), "--model", str(tmp_path)], "has no config.json"),
        ([str(trained_run), "--val-files", str(tmp_path / "none.parquet")], "none.parquet: does not exist"),
    ]
    for argv, said in cases:
        assert eval_cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and "fix: " in err[0], (argv, err)
    assert not (trained_run / runfiles.EVAL_DIR).exists(), "nothing was started"
