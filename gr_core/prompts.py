"""Prompt strings per dataset (GR code ``src/dataset/*.py``; SPEC.md §1.9).

The reference wraps ``desc + question`` in Llama-2 ``[INST]`` markers; with a chat model we
use its own chat template instead (a documented deviation, SPEC.md §1.9).
"""
from __future__ import annotations

EXPLAGRAPHS_QUESTION = (
    "Argument 1: {arg1}\nArgument 2: {arg2}\nQuestion: Do argument 1 and argument 2 support or counter each other? "
    "Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:"
)


WEBQSP_QUESTION = "Question: {question}\nAnswer: "
SCENE_GRAPH_QUESTION = "Question: {question}\n\nAnswer:"


def kgqa_question(question: str) -> str:
    """WebQSP's (and our MetaQA's) question string, as the GR code builds it."""
    return WEBQSP_QUESTION.format(question=question)


def scene_graph_question(question: str) -> str:
    """SceneGraphs' question string (GR code), used for GQA and CLEVR."""
    return SCENE_GRAPH_QUESTION.format(question=question)


def explagraphs_question(arg1: str, arg2: str) -> str:
    """The ExplaGraphs question string, exactly as the GR code builds it."""
    return EXPLAGRAPHS_QUESTION.format(arg1=arg1, arg2=arg2)


def graph_prompt(desc: str, question: str) -> str:
    """The user turn: the textualized graph immediately followed by the question.

    GR code concatenates the desc tokens and the question tokens with nothing between them; the
    desc already ends with a newline (pandas CSV).
    """
    return desc + question
