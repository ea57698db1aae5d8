"""Prompt strings per dataset (GR code ``src/dataset/*.py``; the LLM's own chat template replaces Llama-2's
``[INST]`` markers: docs/method.md §1.4)."""
from __future__ import annotations

from .config import check_choice

EXPLAGRAPHS_QUESTION = (
    "Argument 1: {arg1}\nArgument 2: {arg2}\nQuestion: Do argument 1 and argument 2 support or counter each other? "
    "Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:"
)
WEBQSP_QUESTION = "Question: {question}\nAnswer: "
SCENE_GRAPH_QUESTION = "Question: {question}\n\nAnswer:"  # GR code's SceneGraphs string, used for GQA and CLEVR


def kgqa_question(question: str) -> str:
    """WebQSP's (and our MetaQA's) question string, as the GR code builds it."""
    return WEBQSP_QUESTION.format(question=question)


def explagraphs_question(arg1: str, arg2: str) -> str:
    """The ExplaGraphs question string, exactly as the GR code builds it."""
    return EXPLAGRAPHS_QUESTION.format(arg1=arg1, arg2=arg2)


def graph_prompt(desc: str, question: str) -> str:
    """The user turn: the textualized graph immediately followed by the question, as GR code (the desc, a pandas
    CSV, already ends with a newline)."""
    return desc + question


# Inference-only baselines (GR paper App. B.2; the GR code has none of these, docs/method.md §1.7).
ZERO_COT = "Let's think step by step."  # Kojima et al. 2022
COT_BAG = "Let's construct a graph with the nodes and edges first."  # Wang et al. 2023 ("build-a-graph")

SCENE_GRAPH_DATASETS = ("gqa_micro", "clevr", "gqa")
KGQA_DATASETS = ("webqsp", "webqsp_full", "metaqa", "rog_webqsp", "rog_cwq")


def question_for(dataset: str, question: str) -> str:
    """The dataset's question string (GR code ``src/dataset/*.py``) for a record's question text (ExplaGraphs
    records already hold the full reference string)."""
    if dataset == "explagraphs":
        return question
    if dataset in KGQA_DATASETS:
        return kgqa_question(question)
    if dataset in SCENE_GRAPH_DATASETS:
        return SCENE_GRAPH_QUESTION.format(question=question)
    raise ValueError(f"no question template for dataset {dataset!r}")


# GR paper App. F / Table 1: the hallucination study's request, appended to the question.
CITE_INSTRUCTION = "Answer the question and list the nodes or edges from the graph that support your answer."


# The same request with the format the citation parser reads spelled out (gr_core.citations: ``Nodes:`` / ``Edges:``
# lists, ``(h, r, t)`` edges): a second try for models that ignore the paper's wording (notebook 05 §4b).
CITE_FORMAT_INSTRUCTION = ("Answer the question, then list the nodes and edges of the graph that support your answer, "
                           "as\nNodes: <node>, <node>\nEdges: (<source>, <relation>, <target>)")
CITE_REQUESTS = {"paper": CITE_INSTRUCTION, "format": CITE_FORMAT_INSTRUCTION}


def cite_question(dataset: str, question: str, request: str = "paper") -> str:
    r"""The dataset's question string with the citation request (``request``: a key of :data:`CITE_REQUESTS`;
    ``"paper"`` is :data:`CITE_INSTRUCTION`) placed before its closing ``Answer:`` cue.

    >>> cite_question("clevr", "What color is the cube?")
    'Question: What color is the cube? Answer the question and list the nodes or edges from the graph that support your answer.\n\nAnswer:'
    """  # noqa: E501 a doctest's expected output: one repr, which cannot be wrapped
    check_choice("cite_question", "request", request, tuple(CITE_REQUESTS))
    ask = CITE_REQUESTS[request]
    text = question_for(dataset, question)
    head, cue, tail = text.rpartition("Answer:")
    if not cue or tail.strip():
        return text.rstrip() + " " + ask
    return head.rstrip() + " " + ask + "\n\n" + cue + tail


def label_for(dataset: str, answers: list[str], record: str = "") -> str:
    """The training target: KGQA answers lowercased and joined by ``|`` (GR code), otherwise the one label;
    ``record`` names the question in the error for one without answers."""
    if not answers:
        raise ValueError(f"{dataset}: record {record or '?'} has no answer to train on or score")
    if dataset in KGQA_DATASETS:
        return "|".join(a.lower() for a in answers)
    return answers[0]


# GNN-RAG's RAG prompt (Prompt A, the default; GNN-RAG code llm/; docs/method.md §3.3).
GNN_RAG_INSTRUCTION = ("Based on the reasoning paths, please answer the given question. Please keep the answer as "
                       "simple as possible and return all the possible answers as a list.")


def gnn_rag_parts(paths: list[str] | None, question: str) -> tuple[str, str]:
    """GNN-RAG's prompt A as ``(evidence part, question part)``, whose concatenation is the user turn (instruction,
    ``Reasoning Paths:`` one per line, ``Question:`` with a ``?``), split so that ``GraphLLM`` can cut the evidence to
    its budget; ``paths=None`` gives RoG's no-retrieval prompt."""
    q = question.strip()
    asked = f"\n\nQuestion:\n{q if q.endswith('?') else q + '?'}"
    if paths is None:
        return NO_RETRIEVAL_INSTRUCTION, asked
    return f"{GNN_RAG_INSTRUCTION}\n\nReasoning Paths:\n" + "\n".join(paths), asked


# RoG's prompts: no-retrieval = ``PromptBuilder.SAQ_INSTRUCTION`` (RoG code ``src/qa_prediction/build_qa_input.py``);
# planning = ``src/qa_prediction/gen_rule_path.py`` (docs/method.md §3.3).
NO_RETRIEVAL_INSTRUCTION = ("Please answer the following questions. Please keep the answer as simple as possible and "
                            "return all the possible answer as a list.")
ROG_PLANNING_PROMPT = ("Please generate a valid relation path that can be helpful for answering the following "
                       "question: {question}")
