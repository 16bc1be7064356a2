"""STAND-IN rollout `standin`: what vLLM does for verl, done with Hugging Face forward passes on CPU.

Three parts, as verl's own vLLM backend has them (workers/rollout/vllm_rollout/):
- `StandinServer`, a Ray actor per replica on its rank's node: loads the checkpoint and serves verl's
  token-in/token-out `generate(prompt_ids, sampling_params, ...) -> TokenOutput`, honouring temperature, top-k,
  top-p, repetition penalty, max tokens, stop token ids and ignore_eos, and returning each sampled token's log-prob
  as vLLM's default does (the raw model distribution, before the sampling transforms);
- `StandinReplica`, registered in verl's RolloutReplicaRegistry: starts the server next to its worker;
- `StandinServerAdapter`, registered in verl's rollout registry: lives in verl's ActorRolloutRefWorker and takes
  the trainer's weights through verl's own weight sync (checkpoint engine "naive": engine_workers.update_weights),
  then hands them to the server, which refuses any name it does not know.
Sleep, wake-up and the KV-cache calls do nothing: there is no device memory to free.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

import ray
import torch

from . import LOG_PREFIX, ROLLOUT_NAME

log = logging.getLogger("verl_sim_standin")


def secret_names_here() -> list[str]:
    """Which of the site's secret files (verl-recipe's VERL_RECIPE_SECRET_FILES, NAME=/path,...) are set in this
    worker's environment: names only, so a run on the simulated cluster shows the path works, never the content."""
    listed = (item.partition("=")[0] for item in os.environ.get("VERL_RECIPE_SECRET_FILES", "").split(","))
    return sorted(name for name in listed if name and os.environ.get(name))


# Fault injection for the run watch's tests (issue "After launch"): MiB the trainer-side adapter keeps and never
# frees at every weight sync, as the sleep/wake leak of vllm-ascend#9563 does on a die.
LEAK_ENV = "VERL_SIM_STANDIN_LEAK_MB"


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    getter = getattr(cfg, "get", None)
    if callable(getter):
        try:
            return getter(key, default)
        except Exception:  # noqa: BLE001 - dataclass .get may differ; fall back to the attribute
            pass
    return getattr(cfg, key, default)


def model_path(model_config: Any) -> str:
    path = _get(model_config, "local_path") or _get(model_config, "path")
    if not path:
        raise ValueError(f"{LOG_PREFIX} rollout: the model config names no path")
    return str(path)


def server_name(replica_rank: int) -> str:
    return f"{ROLLOUT_NAME}_server_{replica_rank}_0"


def load_model(path: str) -> tuple[Any, list[int]]:
    """The checkpoint as the trainer loads it (vision-language class for a VLM config), fp32, sdpa; and its
    end-of-sequence ids (generation_config.json, else the config's)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, GenerationConfig

    config = AutoConfig.from_pretrained(path)
    cls = AutoModelForImageTextToText if getattr(config, "vision_config", None) is not None else AutoModelForCausalLM
    model = cls.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    try:
        eos: Any = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:
        eos = getattr(getattr(config, "text_config", config), "eos_token_id", None)
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    return model, ids


def sample(
    logits: torch.Tensor,
    params: dict[str, Any],
    seen: list[int],
    generator: torch.Generator,
) -> tuple[int, float]:
    """One token from the last position's logits with vLLM's sampling parameters, and its raw log-prob."""
    raw = torch.log_softmax(logits.float(), dim=-1)
    x = logits.float().clone()
    penalty = float(params.get("repetition_penalty") or 1.0)
    if penalty != 1.0 and seen:
        idx = torch.tensor(sorted(set(seen)), dtype=torch.long)
        vals = x[idx]
        x[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    temperature = float(params.get("temperature", 1.0) or 0.0)
    if temperature <= 0.0:
        token = int(torch.argmax(x))
        return token, float(raw[token])
    x = x / temperature
    top_k = int(params.get("top_k", -1) or -1)
    if 0 < top_k < x.numel():
        kth = torch.topk(x, top_k).values[-1]
        x = torch.where(x < kth, torch.full_like(x, float("-inf")), x)
    top_p = float(params.get("top_p", 1.0) or 1.0)
    if top_p < 1.0:
        probs_sorted, order = torch.sort(torch.softmax(x, dim=-1), descending=True)
        cut = torch.cumsum(probs_sorted, dim=-1) - probs_sorted > top_p  # keep the smallest set reaching top_p
        x[order[cut]] = float("-inf")
    token = int(torch.multinomial(torch.softmax(x, dim=-1), 1, generator=generator))
    return token, float(raw[token])


class StandinServer:
    """One replica's engine (a Ray actor). Generation runs in a thread; weight loads wait for it."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        self.config, self.replica_rank = config, replica_rank
        self.path = model_path(model_config)
        self.model, self.eos_ids = load_model(self.path)
        self.names = set(self.model.state_dict())
        self.lock = threading.Lock()
        self.global_steps: int | None = None
        self.synced: dict[str, int] = {}
        self.generated = 0
        print(
            f"{LOG_PREFIX} rollout server {replica_rank}: loaded {self.path} on {ray.util.get_node_ip_address()} "
            f"(Hugging Face forward passes on CPU, not vLLM)",
            flush=True,
        )
        if secret_names_here():
            names = ", ".join(secret_names_here())
            print(f"{LOG_PREFIX} rollout server {replica_rank}: secret files in its environment: {names}", flush=True)

    def address(self) -> str:
        # verl keys its load balancer by address: unique per replica, and says what it is.
        return f"standin://{ray.util.get_node_ip_address()}/replica-{self.replica_rank}"

    def max_tokens(self, prompt_len: int, params: dict[str, Any]) -> int:
        want = params.pop("max_tokens", None) or params.pop("max_new_tokens", None)
        response = int(_get(self.config, "response_length", 0) or 0)
        prompt = int(_get(self.config, "prompt_length", 0) or 0)
        limit = int(_get(self.config, "max_model_len", 0) or 0) or (prompt + response)
        room = limit - prompt_len
        if room < 1:
            raise ValueError(f"{LOG_PREFIX} prompt of {prompt_len} tokens leaves no room within {limit}")
        return max(1, min(int(want or response or room), room))

    def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> dict[str, Any]:
        params = dict(params)
        budget = self.max_tokens(len(prompt_ids), params)
        stop = set(self.eos_ids) if not params.get("ignore_eos") else set()
        stop |= set(params.get("stop_token_ids") or [])
        seed = params.get("seed")
        gen = torch.Generator().manual_seed(int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little"))
        ids, out, logps = list(prompt_ids), [], []
        reason = "length"
        with self.lock, torch.no_grad():
            for _ in range(budget):
                logits = self.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
                token, logp = sample(logits, params, ids, gen)
                out.append(token)
                logps.append(logp)
                ids.append(token)
                if token in stop:
                    reason = "stop"
                    break
            self.generated += 1
        return {"token_ids": out, "log_probs": logps if params.get("logprobs") else None, "finish": reason}

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        if image_data or video_data:
            raise NotImplementedError(f"{LOG_PREFIX} rollout: images and video are not served by the stand-in")
        r = await asyncio.to_thread(self._generate, [int(t) for t in prompt_ids], sampling_params)
        return TokenOutput(
            token_ids=r["token_ids"],
            log_probs=r["log_probs"],
            stop_reason="completed",
            extra_fields={"standin_finish": r["finish"]},
        )

    def load_weights(self, tensors: list[tuple[str, torch.Tensor]]) -> int:
        unknown = [name for name, _ in tensors if name not in self.names]
        if unknown:
            raise KeyError(f"{LOG_PREFIX} rollout: the trainer sent weights the model does not have: {unknown[:4]}")
        with self.lock:
            state = dict(tensors)
            self.model.load_state_dict(state, strict=False)
        for name, _ in tensors:
            self.synced[name] = self.synced.get(name, 0) + 1
        return len(tensors)

    def finish_sync(self, global_steps: int | None, count: int) -> dict[str, int]:
        missing = len(self.names) - len(self.synced)
        self.global_steps = global_steps
        self.synced = {}
        print(
            f"{LOG_PREFIX} rollout server {self.replica_rank}: weights synced from the trainer for step "
            f"{global_steps}: {count} tensors, {missing} of the model's not sent",
            flush=True,
        )
        return {"tensors": count, "missing": missing}

    # The engine calls verl makes around a step; nothing to free on CPU.
    def wake_up(self, tags: Any = None) -> None: ...
    def sleep(self) -> None: ...
    def clear_kv_cache(self) -> None: ...
    def release_kv_cache(self) -> None: ...
    def resume_kv_cache(self) -> None: ...
    def set_global_steps(self, steps: int) -> None:
        self.global_steps = steps

    def wait_for_requests_to_drain(self) -> None: ...
    def resume_generation(self) -> None: ...
    def abort_all_requests(self) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    def abort_request(self, request_id: str) -> dict[str, Any]:
        return {"aborted": False, "request_id": request_id}

    def start_profile(self, **_: Any) -> None: ...
    def stop_profile(self) -> None: ...


def _replica_base() -> type:
    from verl.workers.rollout.replica import RolloutReplica

    return RolloutReplica


class StandinReplica(_replica_base()):  # type: ignore[misc]
    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                f"{LOG_PREFIX} rollout serves one rank per replica; rollout tensor/data/pipeline parallel sizes give "
                f"{self.world_size}: set GEN_TP=1 and GEN_DP=1 on the simulated cluster"
            )
        node_id = await self.workers[0].__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id())
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        server = (
            ray.remote(StandinServer)
            .options(
                name=server_name(self.replica_rank),
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
                max_concurrency=self.max_concurrency,
            )
            .remote(self.config, self.model_config, self.replica_rank)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = await server.address.remote()


def _rollout_base() -> type:
    from verl.workers.rollout.base import BaseRollout

    return BaseRollout


class StandinServerAdapter(_rollout_base()):  # type: ignore[misc]
    """In verl's trainer worker: forwards sleep/wake-up and pushes the trainer's weights to the server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        width = int(
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // width if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % width
        self.server: Any = None
        self.leak: list[bytearray] = []

    def _server(self) -> Any:
        if self.rollout_rank != 0:
            return None
        if self.server is None:
            self.server = ray.get_actor(server_name(self.replica_rank))
        return self.server

    async def resume(self, tags: list[str]) -> None:
        server = self._server()
        if server is not None:
            await server.wake_up.remote(tags=tags)

    async def release(self) -> None:
        server = self._server()
        if server is not None:
            await server.sleep.remote()

    @torch.no_grad()
    async def update_weights(self, weights: Any, global_steps: int | None = None, **_: Any) -> None:
        start = time.monotonic()
        server = self._server()
        bucket_mb = int(_get(_get(self.config, "checkpoint_engine"), "update_weights_bucket_megabytes", 512) or 512)
        limit = bucket_mb * 1024 * 1024
        bucket: list[tuple[str, torch.Tensor]] = []
        size = count = 0
        # Every rank walks the whole generator: gathering a sharded parameter is a collective.
        for name, tensor in weights:
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            if server is None:
                continue
            t = full.detach().to("cpu", copy=True).contiguous()
            bucket.append((name, t))
            size += t.numel() * t.element_size()
            if size >= limit:
                count += await server.load_weights.remote(bucket)
                bucket, size = [], 0
        if server is not None:
            if bucket:
                count += await server.load_weights.remote(bucket)
            await server.finish_sync.remote(global_steps, count)
            log.info(
                "%s weight sync to the stand-in rollout: %d tensors in %.2f s",
                LOG_PREFIX,
                count,
                time.monotonic() - start,
            )
        leak_mb = int(os.environ.get(LEAK_ENV, "0") or 0)
        if leak_mb > 0:
            self.leak.append(bytearray(os.urandom(1024)) * (leak_mb * 1024))  # touched pages: real resident memory
