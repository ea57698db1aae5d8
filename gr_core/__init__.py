"""gr_core: graph retrieval-augmented generation over textual graphs (G-Retriever, GNN-RAG).

Importing the package sets ``HF_HUB_OFFLINE=1`` unless the caller set it: every model is
loaded from a local path, and huggingface_hub reads the variable once, at its own import
(docs/environment.md). Export ``HF_HUB_OFFLINE=0`` before starting Python to allow hub ids.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from .paths import cache_root, data_file, data_root, outputs_root, repo_root  # noqa: E402
from .runs import progress, seed_everything  # noqa: E402

__all__ = ["cache_root", "data_file", "data_root", "outputs_root", "repo_root", "progress", "seed_everything"]
__version__ = "0.1.0"
