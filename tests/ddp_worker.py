"""Run by tests under ``torchrun``: train the tiny model on made-up examples with :func:`gr_core.g_retriever.train.fit`
and write the history (argv: tiny LLM folder, device, output folder). Not a test module itself."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_model import SMALL_GNN, _example  # noqa: E402

from gr_core.config import LLMConfig  # noqa: E402
from gr_core.g_retriever.model import GraphLLM, method_config  # noqa: E402
from gr_core.g_retriever.train import TrainConfig, fit, init_distributed  # noqa: E402


def examples(n: int):
    return [_example(1 + i % 4, label="support" if i % 2 else "counter", seed=i) for i in range(n)]


def train(tiny_llm_dir: str, device: str, out: Path, dist=None) -> list[dict]:
    torch.manual_seed(0)
    model = GraphLLM(method_config("g_retriever", llm=LLMConfig(model=tiny_llm_dir, device=device), gnn=SMALL_GNN),
                     in_dim=8)
    train_set, val_set = examples(8), examples(4)
    model.tokenize(train_set + val_set)
    cfg = TrainConfig(lr=1e-2, num_epochs=2, batch_size=4, eval_batch_size=4, patience=5)
    kwargs = {"dist": dist} if dist is not None else {}
    return fit(model, train_set, val_set, cfg, 0, out / "ckpt", "h", **kwargs)


if __name__ == "__main__":
    dist = init_distributed()
    history = train(sys.argv[1], sys.argv[2], Path(sys.argv[3]), dist)
    if dist.main:
        (Path(sys.argv[3]) / "history.json").write_text(json.dumps({"ddp": dist.ddp, "world": dist.world,
                                                                    "history": history}))
    torch.distributed.destroy_process_group()
