"""The CPU stand-in rollout of the simulated cluster (docker/sim-runtime/standin): it samples with vLLM's sampling
parameters and returns the raw model log-prob of each sampled token, as vLLM's default does, and it names (never
shows) the secret files verl-recipe sends its workers. Installed in the dev venv by `requirements/lock.sh install`.

Run by test_standin.py in a process of its own: torch cannot be imported where Ansible's modules already replaced
sys.intern (torch._dynamo refuses the patched one), which other unit tests of the same pytest worker load."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
rollout = pytest.importorskip("verl_sim_standin.rollout")

from verl_recipe.secretfiles import SECRET_FILES_ENV, encode  # noqa: E402
from verl_sim_standin import ROLLOUT_NAME, overlay  # noqa: E402

LOGITS = torch.tensor([2.0, 1.0, 0.5, -1.0])


def draw(params: dict, n: int = 400, seen: list[int] | None = None) -> Counter:
    gen = torch.Generator().manual_seed(0)
    return Counter(rollout.sample(LOGITS, params, seen or [], gen)[0] for _ in range(n))


def test_temperature_zero_is_greedy_with_the_raw_log_prob() -> None:
    token, logp = rollout.sample(LOGITS, {"temperature": 0}, [], torch.Generator())
    assert token == 0
    assert logp == pytest.approx(float(torch.log_softmax(LOGITS, -1)[0]))


def test_log_prob_is_the_raw_distributions_not_the_tempered_one() -> None:
    gen = torch.Generator().manual_seed(1)
    raw = torch.log_softmax(LOGITS, -1)
    for _ in range(20):
        token, logp = rollout.sample(LOGITS, {"temperature": 0.3, "top_k": 2}, [], gen)
        assert logp == pytest.approx(float(raw[token]))


def test_top_k_and_top_p_cut_the_tail() -> None:
    assert set(draw({"temperature": 1.0, "top_k": 1})) == {0}
    assert set(draw({"temperature": 1.0, "top_k": 2})) <= {0, 1}
    assert set(draw({"temperature": 1.0, "top_p": 0.5})) == {0}  # token 0 alone holds more than half


def test_temperature_one_follows_the_model_distribution() -> None:
    n = 2000
    seen = draw({"temperature": 1.0}, n)
    probs = torch.softmax(LOGITS, -1)
    for token in range(4):
        assert seen[token] / n == pytest.approx(float(probs[token]), abs=0.04)


def test_repetition_penalty_moves_away_from_seen_tokens() -> None:
    assert rollout.sample(LOGITS, {"temperature": 0}, [0], torch.Generator())[0] == 0
    assert rollout.sample(LOGITS, {"temperature": 0, "repetition_penalty": 4.0}, [0], torch.Generator())[0] == 1


def test_overlay_selects_the_standin_rollout() -> None:
    hydra = overlay()["hydra"]
    assert hydra["actor_rollout_ref.rollout.name"] == ROLLOUT_NAME


def test_secret_names_are_read_from_what_verl_recipe_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_FILES_ENV, encode({"TRACKER_KEY": "/etc/k", "OTHER_TOKEN": "/etc/o"}))
    monkeypatch.setenv("TRACKER_KEY", "s3cr3t")
    monkeypatch.delenv("OTHER_TOKEN", raising=False)
    assert rollout.secret_names_here() == ["TRACKER_KEY"]  # set ones only, by name
