"""GraphQA dataset builders over the real raw files (GR paper §4.2, App. C; docs/method.md §2).

Each builder returns ``(records, graphs, kg, notes)``: the questions, one textual graph per question (``None`` for
knowledge-base datasets, cut from ``kg`` on demand) and the handling counts. Errors name the file, line and field.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .data import (EDGE_COLUMNS, GraphFormatError, TextualGraph, graph_from_triples, load_explagraphs, not_utf8,
                   text_lines, utf8_rows, utf8_text)
from .kg import KnowledgeGraph
from .paths import GQA_FILES, data_file  # GQA_FILES: the official files, image id -> scene, question id -> question


@dataclass
class QARecord:
    """One question: text, gold answers, topic entities (KGQA), its graph's id, extra fields."""

    question: str
    answers: list[str]
    graph_id: str
    q_entities: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def graphqa_split(n: int, seed: int = 42) -> dict[str, list[int]]:
    """The GR code's 6:2:2 split: ``train_test_split`` with test size 0.4, then 0.5 of the rest (with ``seed=42``
    and ``n=2766``, exactly the reference ExplaGraphs split)."""
    from sklearn.model_selection import train_test_split  # noqa: PLC0415 deferred: scikit-learn (~1.4 s at start-up), needed only here

    idx = np.arange(n)
    train, rest = train_test_split(idx, test_size=0.4, random_state=seed)
    val, test = train_test_split(rest, test_size=0.5, random_state=seed)
    return {"train": train.tolist(), "val": val.tolist(), "test": test.tolist()}


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        try:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rows.append((i, json.loads(line)))
                except json.JSONDecodeError as err:
                    raise GraphFormatError(f"{path}:{i}: not valid JSON ({err.msg})") from None
        except UnicodeDecodeError:
            raise not_utf8(path) from None
    if not rows:
        raise GraphFormatError(f"{path}: no records")
    return rows


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except json.JSONDecodeError as err:
        raise GraphFormatError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None


def _field(obj, key: str, where: str, kind="text"):
    """``obj[key]``, checked: ``"text"`` a non-empty string, ``"texts"`` a list of strings, ``"answers"`` a list of
    one or more non-empty strings, else an instance of ``kind``; a :class:`GraphFormatError` naming ``where`` and the
    field otherwise."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if kind == "text":
        ok, expected = isinstance(value, str) and value.strip() != "", "a non-empty string"
    elif kind == "texts":
        ok, expected = isinstance(value, list) and all(isinstance(x, str) for x in value), "a list of strings"
    elif kind == "answers":  # a question without a gold answer can be neither trained on nor scored
        ok = isinstance(value, list) and bool(value) and all(isinstance(x, str) and x.strip() for x in value)
        expected = "a list of one or more non-empty strings (the gold answers)"
    else:
        ok, expected = isinstance(value, kind), f"a {kind.__name__}"
    if not ok:
        raise GraphFormatError(f"{where}: field {key!r} is {repr(value)[:60]}, expected {expected}")
    return value


def _checked_triples(row: dict, path: Path, line: int) -> list[tuple[str, str, str]]:
    triples = row.get("graph")
    if not isinstance(triples, list):
        raise GraphFormatError(f"{path}:{line}: field 'graph' must be a list of [head, relation, tail]")
    for j, t in enumerate(triples):
        if not (isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)):
            raise GraphFormatError(f"{path}:{line}: field 'graph', triple {j} is {t!r}, "
                                   "expected [head, relation, tail] strings")
    return [tuple(t) for t in triples]


# ---------------------------------------------------------------- ExplaGraphs
def build_explagraphs():
    """2,766 rows of ``train_dev.tsv``; the reference split. Records keep the GR question string."""
    graphs = load_explagraphs()
    records = [QARecord(g.question, g.answers, g.graph_id) for g in graphs]
    return records, graphs, None, {}


# ---------------------------------------------------------------- WebQSP
def build_webqsp(file: str = "minigraphs.jsonl"):
    """WebQSP questions with their graphs (``minigraphs.jsonl``: 1,628; ``full_subgraphs.jsonl``: 18).

    As GR code ``preprocess/webqsp.py``: entities, answers and topic entities lowercased, relations kept, duplicate
    triples kept as multi-edges, names such as ``nan`` kept as strings.
    """
    path = data_file("webqsp", file)
    records, graphs, empty, first = [], [], 0, {}
    for line, row in _read_jsonl(path):
        where = f"{path}:{line}"
        qid, question = _field(row, "id", where), _field(row, "question", where)
        if qid in first:  # a question's graph is cached by its id: a repeated id would read the first one's graph
            raise GraphFormatError(f"{where}: field 'id' {qid!r} repeats line {first[qid]}")
        first[qid] = line
        rec = QARecord(question, [a.lower() for a in _field(row, "answer", where, "answers")], qid,
                       [e.lower() for e in _field(row, "q_entity", where, "texts")])
        graph = graph_from_triples([(h.lower(), r, t.lower()) for h, r, t in _checked_triples(row, path, line)],
                                   lowercase=False, question=rec.question, answers=rec.answers, graph_id=rec.graph_id,
                                   q_entities=rec.q_entities)
        empty += graph.num_nodes == 0
        records.append(rec)
        graphs.append(graph)
    return records, graphs, None, {"empty_graphs": empty}


# ---------------------------------------------------------------- MetaQA
def load_metaqa_kb(path: Path | None = None) -> KnowledgeGraph:
    """The MetaQA KB (``subject|relation|object`` per line) as one :class:`KnowledgeGraph`. Entities are names, as in
    MetaQA: a movie and a person of one name are one entity (2 self-loops: ``Patch Adams|written_by|Patch Adams``)."""
    path = path or data_file("metaqa", "kb.txt")
    ents: dict[str, int] = {}
    rels: dict[str, int] = {}
    heads, relations, tails = [], [], []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(utf8_rows(fh, path), 1):
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3 or not all(parts):
                raise GraphFormatError(f"{path}:{i}: expected 'subject|relation|object', got {line.rstrip()!r}")
            h, r, t = parts
            heads.append(ents.setdefault(h, len(ents)))
            relations.append(rels.setdefault(r, len(rels)))
            tails.append(ents.setdefault(t, len(ents)))
    if not heads:
        raise GraphFormatError(f"{path}: the knowledge base has no triples")
    return KnowledgeGraph(list(ents), list(rels), np.array(heads), np.array(relations), np.array(tails))


# a question's topic entity as MetaQA writes it, "[Name]"; the chat reads a user's brackets the same way
TOPIC_BRACKETS = re.compile(r"\[([^\]]+)\]")


def read_metaqa_questions(path: Path, kg: KnowledgeGraph, on_unknown: str = "raise") -> tuple[list[QARecord], dict]:
    """``question-with-[topic] \\t answer1|answer2`` lines, the topic linked to the KB by exact name, its brackets
    dropped. A topic missing from the KB raises (``on_unknown="skip"``: skipped and counted); answers missing from
    the KB are kept and counted."""
    qtype_path = path.with_name(path.stem + "_qtype.txt")
    qtypes = text_lines(utf8_text(qtype_path)) if qtype_path.exists() else None
    lines = text_lines(utf8_text(path))
    if qtypes is not None and len(qtypes) != len(lines):  # line-aligned: a shift would give every question another type
        raise GraphFormatError(f"{qtype_path}: {len(qtypes)} lines, {path.name} {len(lines)}; the two must be "
                               "line-aligned")
    records, skipped, unknown_answers = [], 0, 0
    for i, line in enumerate(lines, 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise GraphFormatError(f"{path}:{i}: expected 'question<TAB>answers', got {line.rstrip()!r}")
        question, answers = parts
        topic = TOPIC_BRACKETS.search(question)
        if topic is None:
            raise GraphFormatError(f"{path}:{i}: field 'question' has no [topic entity]: {question!r}")
        if topic.group(1) not in kg.entity_id:
            if on_unknown == "skip":
                skipped += 1
                continue
            raise GraphFormatError(f"{path}:{i}: topic entity [{topic.group(1)}] is not in the knowledge base")
        answer_list = answers.split("|")
        if not all(answer_list):
            raise GraphFormatError(f"{path}:{i}: field 'answers' has an empty answer: {answers!r}")
        unknown_answers += sum(a not in kg.entity_id for a in answer_list)
        extra = {"line": i}
        if qtypes is not None:
            extra["qtype"] = qtypes[i - 1]
        records.append(QARecord(TOPIC_BRACKETS.sub(r"\1", question), answer_list,
                                f"{path.parent.name}/{path.stem}:{i}", [topic.group(1)], extra))
    if not records and not skipped:
        raise GraphFormatError(f"{path}: no questions")
    return records, {"unknown_topic_skipped": skipped, "answers_not_in_kb": unknown_answers}


def build_metaqa(hops: int = 2, val_fraction: float = 0.1, seed: int = 42):
    """MetaQA ``hops``-hop: train/val from the official dev file (seeded), test = the official test file (the
    official train questions are not available offline: a deviation, docs/method.md §2)."""
    if hops not in (1, 2, 3):
        raise ValueError(f"MetaQA hops={hops} must be 1, 2 or 3")
    kg = load_metaqa_kb()
    dev, notes_dev = read_metaqa_questions(data_file("metaqa", f"{hops}-hop", "qa_dev.txt"), kg)
    test, notes_test = read_metaqa_questions(data_file("metaqa", f"{hops}-hop", "qa_test.txt"), kg)
    # The files are grouped by question type, so every split is kept in a seeded random order: "the first N" of a
    # split (the presets' subsets) is then a random sample of all types, not one or two of them.
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(dev))
    n_val = int(round(val_fraction * len(dev)))
    split = {"train": order[n_val:].tolist(), "val": order[:n_val].tolist(),
             "test": (len(dev) + rng.permutation(len(test))).tolist()}
    notes = {k: notes_dev[k] + notes_test[k] for k in notes_dev}
    return dev + test, None, kg, {**notes, "split": split}


# ---------------------------------------------------------------- Scene graphs
def gqa_node_text(obj: dict) -> str:
    """GR code ``scene_graphs.py``: ``name: …; attribute: a, b; (x,y,w,h): (x, y, w, h)``."""
    text = f"name: {obj['name']}"
    if obj.get("attributes"):
        text += "; attribute: " + ", ".join(obj["attributes"])
    return text + "; (x,y,w,h): " + str((obj["x"], obj["y"], obj["w"], obj["h"]))


def gqa_scene_graph(scene: dict, where: str) -> TextualGraph:
    """One GQA scene graph: object ids renumbered 0..N-1 in file order, relation edges subject -> object."""
    objects = scene.get("objects")
    if not isinstance(objects, dict):
        raise GraphFormatError(f"{where}: field 'objects' must be a mapping of object id -> object")
    node_of = {oid: i for i, oid in enumerate(objects)}
    nodes, edges = [], []
    for oid, obj in objects.items():
        missing = {"name", "x", "y", "w", "h"} - set(obj)
        if missing:
            raise GraphFormatError(f"{where}: object {oid} lacks field(s) {sorted(missing)}")
        nodes.append((node_of[oid], gqa_node_text(obj)))
        for rel in obj.get("relations", []):
            _field(rel, "name", f"{where}: object {oid} relation")
            if rel.get("object") not in node_of:
                raise GraphFormatError(f"{where}: object {oid} relation {rel.get('name')!r} points to unknown object "
                                       f"{rel.get('object')!r}")
            edges.append((node_of[oid], rel["name"], node_of[rel["object"]]))
    return TextualGraph(nodes=pd.DataFrame(nodes, columns=["node_id", "node_attr"]),
                        edges=pd.DataFrame(edges, columns=EDGE_COLUMNS).astype({"src": np.int64, "dst": np.int64}))


def _split_by_image(image_ids: list[str], seed: int = 42) -> dict[str, list[int]]:
    """GR code's SceneGraphs split: 6:2:2 over unique images (permuted with ``seed``), so no image appears in two
    splits; returns question indices."""
    unique = np.array(sorted(set(image_ids)))
    unique = unique[np.random.default_rng(seed).permutation(len(unique))]
    by_image = (graphqa_split(len(unique), seed) if len(unique) >= 5
                else {"train": list(range(len(unique))), "val": [], "test": []})
    part = {img: name for name, idx in by_image.items() for img in unique[idx]}
    return {name: [i for i, img in enumerate(image_ids) if part[img] == name] for name in ("train", "val", "test")}


def build_gqa(folder: str = "gqa_micro", seed: int = 42):
    """GQA scene graphs (``train_sceneGraphs.json``) + ``questions.csv``, in the reference formats."""
    scenes_path = data_file("scene_graphs", folder, "train_sceneGraphs.json")
    questions_path = data_file("scene_graphs", folder, "questions.csv")
    scenes = _read_json(scenes_path)
    cache: dict[str, TextualGraph] = {}
    records, graphs, first = [], [], {}
    reader = csv.DictReader(io.StringIO(utf8_text(questions_path)))
    if missing := {"q_id", "image_id", "question", "answer", "full_answer"} - set(reader.fieldnames or []):
        raise GraphFormatError(f"{questions_path}:1: header lacks column(s) {sorted(missing)}")
    for i, row in enumerate(reader, 2):
        if None in row.values() or None in row:
            raise GraphFormatError(f"{questions_path}:{i}: not the header's {len(reader.fieldnames)} columns")
        if row["q_id"] in first:
            raise GraphFormatError(f"{questions_path}:{i}: field 'q_id' {row['q_id']!r} repeats line "
                                   f"{first[row['q_id']]}")
        first[row["q_id"]] = i
        image = row.get("image_id")
        if image not in scenes:
            raise GraphFormatError(f"{questions_path}:{i}: field 'image_id' {image!r} has no scene graph in "
                                   f"{scenes_path.name}")
        if image not in cache:
            cache[image] = gqa_scene_graph(scenes[image], f"{scenes_path}: image {image}")
        rec = QARecord(row["question"], [row["answer"]], image,
                       extra={"q_id": row["q_id"], "full_answer": row["full_answer"]})
        base = cache[image]
        graphs.append(TextualGraph(base.nodes, base.edges, rec.question, rec.answers, image))
        records.append(rec)
    if not records:
        raise GraphFormatError(f"{questions_path}: no questions")
    return records, graphs, None, {"split": _split_by_image([r.graph_id for r in records], seed), "scenes": len(cache)}


GQA_SAMPLE = 100_000  # GR App. C: "We randomly sampled 100k samples from the original dataset"


def build_gqa_full(sample: int | None = GQA_SAMPLE, seed: int = 42, max_questions: int | None = None):
    """GQA at full size: the official train and val scene graphs and balanced questions, pooled; GR's seeded sample
    of ``sample`` questions (None keeps all), split 6:2:2 over unique images. A question without a scene graph is
    skipped and counted; ``max_questions`` keeps the first N of each split, and only their scenes become graphs.
    """
    scenes: dict[str, tuple[dict, Path]] = {}
    for scene_file, _ in GQA_FILES:
        path = data_file("gqa", scene_file)
        with open(path, encoding="utf-8") as fh:
            scenes.update((image, (scene, path)) for image, scene in json.load(fh).items())
    pool, skipped = [], 0
    for _, question_file in GQA_FILES:
        path = data_file("gqa", question_file)
        with open(path, encoding="utf-8") as fh:
            questions = json.load(fh)
        for qid, q in questions.items():
            missing = {"imageId", "question", "answer"} - set(q)
            if missing:
                raise GraphFormatError(f"{path}: question {qid}: missing field(s) {sorted(missing)}")
            if q["imageId"] not in scenes:
                skipped += 1
                continue
            pool.append(QARecord(q["question"], [q["answer"]], q["imageId"],
                                 extra={"q_id": qid, "full_answer": q.get("fullAnswer", "")}))
        del questions
    with_scene = len(pool)
    if sample is not None and len(pool) > sample:
        pool = [pool[i] for i in np.sort(np.random.default_rng(seed).choice(len(pool), sample, replace=False))]
    split = _split_by_image([r.graph_id for r in pool], seed)
    keep = sorted(i for v in split.values() for i in (v[:max_questions] if max_questions else v))
    remap = {old: new for new, old in enumerate(keep)}
    split = {k: [remap[i] for i in v if i in remap] for k, v in split.items()}
    records, graphs, built = [pool[i] for i in keep], [], {}
    for rec in records:
        if rec.graph_id not in built:
            scene, path = scenes[rec.graph_id]
            built[rec.graph_id] = gqa_scene_graph(scene, f"{path}: image {rec.graph_id}")
        base = built[rec.graph_id]
        graphs.append(TextualGraph(base.nodes, base.edges, rec.question, rec.answers, rec.graph_id))
    return records, graphs, None, {"split": split, "scenes": len(built), "no_scene_skipped": skipped,
                                   "questions_with_scene": with_scene, "sampled": len(pool)}


# CLEVR relationships[rel][i] lists the objects that are `rel` of object i.
CLEVR_RELATIONS = {"left": "to the left of", "right": "to the right of", "front": "in front of", "behind": "behind"}


def clevr_scene_graph(scene: dict, where: str) -> TextualGraph:
    """A CLEVR scene in the GQA text format: ``name: cube; attribute: large, brown, rubber; (x,y): (119, 131)``
    (pixel coordinates of the object's centre), and one edge ``j -[to the left of]-> i`` per relationship."""
    objects, relationships = _field(scene, "objects", where, list), _field(scene, "relationships", where, dict)
    if unknown := set(relationships) - set(CLEVR_RELATIONS):
        raise GraphFormatError(f"{where}: field 'relationships' has unknown key(s) {sorted(unknown)}")
    nodes = []
    for i, obj in enumerate(objects):
        try:
            x, y = obj["pixel_coords"][:2]
            nodes.append((i, f"name: {obj['shape']}; attribute: {obj['size']}, {obj['color']}, {obj['material']}; "
                             f"(x,y): ({round(x)}, {round(y)})"))
        except (KeyError, TypeError, ValueError) as err:
            raise GraphFormatError(f"{where}: object {i}: missing or bad field ({err})") from None
    edges = []
    for rel, text in CLEVR_RELATIONS.items():
        for i, others in enumerate(relationships.get(rel, [])):
            if i >= len(objects) or not all(isinstance(j, int) and 0 <= j < len(objects) for j in others):
                raise GraphFormatError(f"{where}: relationships {rel!r}[{i}] = {others!r} names no object of "
                                       f"{len(objects)}")
            edges.extend((j, text, i) for j in others)
    return TextualGraph(nodes=pd.DataFrame(nodes, columns=["node_id", "node_attr"]),
                        edges=pd.DataFrame(edges, columns=EDGE_COLUMNS).astype({"src": np.int64, "dst": np.int64}))


# the question files read, and so those whose checksums key the cached dataset (gr_core.graphqa.RAW_FILES)
CLEVR_QUESTIONS = [f"CLEVR_{s}_1_{t}.json" for s in ("train", "val")
                   for t in ("compare_integer", "one_hop", "same_relate", "single_or", "zero_hop")]


def build_clevr(val_fraction: float = 0.2, seed: int = 42):
    """CLEVR (question, scene, answer) pairs whose scene is present: train/val from the train pairs,
    split by image (seeded); test = the official val pairs."""
    scenes = {}
    for name in ("CLEVR_train_scenes_1000.json", "CLEVR_val_scenes_500.json"):
        path = data_file("scene_graphs", "clevr", name)
        for k, s in enumerate(_field(_read_json(path), "scenes", str(path), list)):
            image = _field(s, "image_filename", f"{path}: scene {k}")
            if image in scenes:
                raise GraphFormatError(f"{path}: scene {k}: image_filename {image!r} repeats a scene")
            scenes[image] = (s, f"{path}: {image}")
    graphs_by_image: dict[str, TextualGraph] = {}
    records, graphs, part, dropped = [], [], [], 0
    for path in (data_file("scene_graphs", "clevr", "questions", name) for name in CLEVR_QUESTIONS):
        for k, q in enumerate(_field(_read_json(path), "questions", str(path), list)):
            where = f"{path}: question {k}"
            for key, kind in (("question", "text"), ("template_filename", "text"), ("image_filenames", "texts"),
                              ("answers", list)):
                _field(q, key, where, kind)
            if q.get("split") not in ("train", "val"):
                raise GraphFormatError(f"{where}: field 'split' is {q.get('split')!r}, expected train or val")
            if len(q["image_filenames"]) != len(q["answers"]) or None in q["answers"]:
                raise GraphFormatError(f"{where}: image_filenames and answers differ in length, or an answer is null")
            for image, answer in zip(q["image_filenames"], q["answers"]):
                if image not in scenes:
                    dropped += 1
                    continue
                if image not in graphs_by_image:
                    graphs_by_image[image] = clevr_scene_graph(*scenes[image])
                base = graphs_by_image[image]
                answer = ("yes" if answer else "no") if isinstance(answer, bool) else str(answer)  # stored as bools
                rec = QARecord(q["question"], [answer], image,
                               extra={"template": q["template_filename"], "source": path.name})
                records.append(rec)
                graphs.append(TextualGraph(base.nodes, base.edges, rec.question, rec.answers, image))
                part.append(q["split"])
    train_idx = [i for i, s in enumerate(part) if s == "train"]
    images = sorted({records[i].graph_id for i in train_idx})
    rng = np.random.default_rng(seed)
    val_images = set(np.array(images)[rng.permutation(len(images))[: int(round(val_fraction * len(images)))]].tolist())
    split = {"train": [i for i in train_idx if records[i].graph_id not in val_images],
             "val": [i for i in train_idx if records[i].graph_id in val_images],
             "test": [i for i, s in enumerate(part) if s == "val"]}
    return records, graphs, None, {"split": split, "pairs_without_scene": dropped, "scenes_used": len(graphs_by_image)}
