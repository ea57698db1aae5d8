"""Every number the two papers publish that this project compares with, in one place.

One scale everywhere, the paper's own: accuracy as a fraction (ExplaGraphs, SceneGraphs), Hit / Hit@1 / F1 in
percent (WebQSP, MetaQA), answer coverage as a fraction, tokens and nodes as counts, minutes per epoch as minutes.
GR: He et al., G-Retriever (NeurIPS 2024, final version); GNN-RAG: Mavromatis & Karypis (2024). Each table names its
source.
"""
from __future__ import annotations

# ---------------------------------------------------------------------- G-Retriever
# GR Table 2 (graphs, mean nodes, mean edges) and Table 4's "before retrieval" tokens; GNN-RAG Table 7 (mean subgraph
# entities, answer coverage as a fraction of questions) for the KGQA sets.
PAPER_STATS = {
    "explagraphs": {"graphs": 2766, "mean_nodes": 5.17, "mean_edges": 4.25, "source": "GR Table 2"},
    "gqa_micro": {"graphs": 100000, "mean_nodes": 19.13, "mean_edges": 68.44, "mean_tokens": 1396,
                  "source": "GR Tables 2, 4 (full GQA SceneGraphs)"},
    "webqsp": {"graphs": 4737, "mean_nodes": 1370.89, "mean_edges": 4252.37, "mean_tokens": 100627,
               "coverage_any": 0.949, "source": "GR Tables 2, 4 (full 2-hop subgraphs); GNN-RAG Table 7"},
    "metaqa_3hop": {"mean_nodes": 497.9, "coverage_any": 0.990, "source": "GNN-RAG Table 7 (MetaQA-3)"},
}
PAPER_STATS["clevr"] = {**PAPER_STATS["gqa_micro"],
                        "source": "GR Tables 2, 4 (GQA SceneGraphs; CLEVR stands in for it)"}
PAPER_STATS["gqa"] = {**PAPER_STATS["gqa_micro"], "source": "GR Tables 2, 4"}
PAPER_STATS["webqsp_full"] = {**PAPER_STATS["webqsp"], "source": "GR Tables 2, 4; GNN-RAG Table 7"}
PAPER_STATS["rog_webqsp"] = PAPER_STATS["webqsp_full"]

# Where each dataset's questions and graphs come from (graphqa.dataset_source): every table and RESULTS.md row names
# it, so that a stand-in is never read as the paper's data (docs/data.md).
DATASET_SOURCE = {
    "explagraphs": "ExplaGraphs train+dev, GR's file and 6:2:2 split",
    "webqsp": "offline stand-in: re-split RoG test mini-graphs",
    "webqsp_full": "RoG-webqsp test rows (18 complete 2-hop graphs)",
    "metaqa": "MetaQA KB and questions; train/val re-split from the official dev questions",
    "gqa_micro": "offline stand-in: 14 GQA-format scenes, 33 questions",
    "clevr": "offline stand-in: CLEVR scenes for GQA SceneGraphs",
    "rog_webqsp": "RoG-webqsp, 2-hop graphs (rmanluo/RoG-webqsp)",
    "rog_cwq": "RoG-cwq, 2-hop graphs (rmanluo/RoG-cwq)",
    "gqa": "GQA scene graphs and balanced questions, GR's 100k sample split by image",
}

# GR Table 3: (mean, std) per method and paper column; inference-only rows have no std. Question-only: v1 Table 3 and
# Table 12 (WebQSP 61.16 in Table 12; 0.6136 as a fraction in v1 Table 3).
PAPER_TABLE3: dict[str, dict[str, tuple[float, float | None]]] = {
    "question_only": {"explagraphs": (0.5704, None), "webqsp": (61.16, None)},
    "zero_shot": {"explagraphs": (0.5650, None), "scene_graphs": (0.3974, None), "webqsp": (41.06, None)},
    "zero_cot": {"explagraphs": (0.5704, None), "scene_graphs": (0.5260, None), "webqsp": (51.30, None)},
    "cot_bag": {"explagraphs": (0.5794, None), "scene_graphs": (0.5680, None), "webqsp": (39.60, None)},
    "kaping": {"explagraphs": (0.6227, None), "scene_graphs": (0.4375, None), "webqsp": (52.64, None)},
    "prompt_tuning": {"explagraphs": (0.5763, 0.0243), "scene_graphs": (0.6341, 0.0024), "webqsp": (48.34, 0.64)},
    "graph_token": {"explagraphs": (0.8508, 0.0551), "scene_graphs": (0.4903, 0.0105), "webqsp": (57.05, 0.74)},
    "g_retriever": {"explagraphs": (0.8516, 0.0092), "scene_graphs": (0.8131, 0.0162), "webqsp": (70.49, 1.21)},
    "lora": {"explagraphs": (0.8538, 0.0353), "scene_graphs": (0.7862, 0.0031), "webqsp": (66.03, 0.47)},
    "g_retriever_lora": {"explagraphs": (0.8705, 0.0329), "scene_graphs": (0.8683, 0.0072), "webqsp": (73.79, 0.70)},
}
# our datasets -> the paper column they stand in for (CLEVR for SceneGraphs; MetaQA is not in GR)
PAPER_COLUMN = {"explagraphs": "explagraphs", "clevr": "scene_graphs", "gqa_micro": "scene_graphs",
                "gqa": "scene_graphs", "webqsp": "webqsp", "webqsp_full": "webqsp", "rog_webqsp": "webqsp",
                "metaqa": None, "rog_cwq": None}

# GR Table 4 (final version): before / after retrieval
PAPER_TABLE4 = {
    "scene_graphs": {"tokens_before": 1396, "nodes_before": 19, "min_epoch_before": 123.1, "tokens_after": 235,
                     "nodes_after": 5, "min_epoch_after": 86.8},
    "webqsp": {"tokens_before": 100627, "nodes_before": 1371, "min_epoch_before": 18.7, "tokens_after": 610,
               "nodes_after": 18, "min_epoch_after": 6.2},
}
# GR Table 12 (WebQSP, 2 x A100-80G): Hit@1 and time (inference: minutes for the test set)
PAPER_TABLE12 = {
    "question_only": (61.16, "31 min"), "zero_shot": (41.06, "40 min"), "prompt_tuning": (48.34, "18.7 min/epoch"),
    "g_retriever": (70.49, "6.2 min/epoch"), "lora": (66.03, "19 min/epoch"),
    "g_retriever_lora": (73.79, "6.9 min/epoch"),
}

# GR Table 5 (SceneGraphs, 100 hand-checked responses per system), percent
PAPER_TABLE5 = {
    "graph_token": {"valid_nodes_%": 31.0, "valid_edges_%": 12.0, "fully_valid_%": 8.0},
    "g_retriever": {"valid_nodes_%": 77.0, "valid_edges_%": 76.0, "fully_valid_%": 62.0},
}

# GR Table 6, WebQSP Hit@1, full model 70.49; "w/o graph encoder" = 10 trainable soft tokens = our prompt_tuning.
PAPER_TABLE6 = {"g_retriever": 70.49, "prompt_tuning": 54.62, "gr_wo_projector": 69.70, "gr_wo_text": 56.96,
                "gr_wo_retrieval": 63.84}

# GR Table 7: WebQSP Hit@1, ExplaGraphs accuracy
PAPER_TABLE7 = {"g_retriever_gcn": {"webqsp": 70.70, "explagraphs": 0.8394},
                "g_retriever_gat": {"webqsp": 70.27, "explagraphs": 0.8430},
                "g_retriever": {"webqsp": 70.49, "explagraphs": 0.8516}}

# GR Table 8 (LLM size) and Table 10 (k of the top-k prizes), WebQSP Hit@1
PAPER_TABLE8 = {"Llama-2-7b": 70.49, "Llama-2-13b": 75.58}
PAPER_TABLE10 = {3: 69.77, 5: 70.63, 10: 72.48, 20: 70.39}
# GR Table 11: "retrieval accuracy" on WebQSP, PCST (G-Retriever) and KAPING's top-k triples; undefined there, its
# PCST value is G-Retriever's end-task Hit@1 (Table 3): notebook 02 measures the answer in the retrieved subgraph
PAPER_TABLE11 = {"pcst": 70.49, "kaping": 60.81}

# ---------------------------------------------------------------------- GNN-RAG
# The GNN reasoner alone (GNN-RAG Table 2, ReaRev on dense subgraphs), H@1 and F1
PAPER_GNN_ONLY = {
    "webqsp": {"h1": 76.4, "f1": 70.9, "source": "ReaRev, GNN-RAG Table 2"},
    "rog_cwq": {"h1": 52.9, "f1": 47.8, "source": "ReaRev, GNN-RAG Table 2"},
}
# GNN-RAG paper numbers for our rows (Hit / H@1 / F1 in %, median input tokens; GNN-RAG paper Tables 2, 4).
PAPER_GNN_RAG = {
    ("webqsp", "none"): {"Hit": 64.4, "source": "untuned LLaMA2-Chat-7B, Table 5"},
    ("webqsp", "rog"): {"Hit": 85.7, "Hit@1": 80.0, "F1": 70.8, "tokens": 202, "source": "RoG, Tables 4/12 (d)"},
    ("webqsp", "gnn"): {"Hit": 85.7, "Hit@1": 80.6, "F1": 71.3, "tokens": 144, "source": "GNN-RAG, Tables 2/4 (e)"},
    ("webqsp", "gnn+rog"): {"Hit": 90.7, "Hit@1": 82.8, "F1": 73.5, "tokens": 299,
                            "source": "GNN-RAG+RA, Tables 2/4 (h)"},
    ("webqsp", "pcst"): {"Hit@1": 70.1, "source": "G-Retriever (LLaMA2-7B), GNN-RAG Table 2"},
    ("rog_cwq", "none"): {"Hit": 34.6, "source": "untuned LLaMA2-Chat-7B, Table 5"},
    ("rog_cwq", "rog"): {"Hit": 62.6, "Hit@1": 57.8, "F1": 56.2, "source": "RoG, Table 2"},
    ("rog_cwq", "gnn"): {"Hit": 66.8, "Hit@1": 61.7, "F1": 59.4, "source": "GNN-RAG, Table 2"},
    ("rog_cwq", "gnn+rog"): {"Hit": 68.7, "Hit@1": 62.8, "F1": 60.4, "source": "GNN-RAG+RA, Table 2"},
    ("metaqa-3hop", "gnn"): {"Hit@1": 98.6, "source": "GNN-RAG, Table 11"},
    ("metaqa-3hop", "rog"): {"Hit@1": 84.8, "source": "RoG, GNN-RAG Table 11"},
}
# RoG-webqsp is the papers' own WebQSP: the same rows (the re-split mini-graphs only stand in for them)
PAPER_GNN_ONLY["rog_webqsp"] = PAPER_GNN_ONLY["webqsp"]
PAPER_GNN_RAG.update({("rog_webqsp", r): v for (k, r), v in list(PAPER_GNN_RAG.items()) if k == "webqsp"})
PAPER_HOPS_F1 = {  # GNN-RAG Table 8 (WebQSP F1 by hops)
    ("rog", 1): 73.4, ("rog", 2): 63.3, ("gnn", 1): 72.0, ("gnn", 2): 69.8, ("gnn+rog", 1): 74.6, ("gnn+rog", 2): 71.1,
}
