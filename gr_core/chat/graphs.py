"""Reading user graphs for the chat (triples files, GraphQA CSV pairs, benchmark graphs by spec), writing triples;
every reader raises :class:`~gr_core.data.GraphFormatError` naming the file, line and field of bad input."""
from __future__ import annotations

import csv
import io
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import EDGE_COLUMNS, NODE_COLUMNS, GraphFormatError, TextualGraph, graph_from_triples
from ..datasets import load_metaqa_kb
from ..graphqa import load_dataset
from ..paths import data_file
from ..runs import atomic_write_text
from .config import ChatConfig


def _open_text(path: str | Path) -> str:
    if not str(path).strip():  # Path("") is the current folder
        raise GraphFormatError("an empty path: name the file to read")
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise GraphFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise GraphFormatError(f"{path}: is a directory, expected a file") from None
    except OSError as err:
        raise GraphFormatError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise GraphFormatError(f"{path}:{line}: not UTF-8 text (byte {err.start}); save the file as UTF-8") from None


# a first line of one word from each set is a header ("head, relation, tail", "subject, predicate, object", ...)
_HEADER_WORDS = ({"head", "subject", "src", "source"},
                 {"relation", "predicate", "rel", "edge_attr", "property", "verb"},
                 {"tail", "object", "dst", "target"})


def _is_header(fields: list[str]) -> bool:
    low = tuple(f.lower() for f in fields)
    return low == ("h", "r", "t") or len(low) == 3 and all(f in words for f, words in zip(low, _HEADER_WORDS))


def _unquoted(field: str) -> str:
    """A field written whole in CSV quotes (``"a ""b"" c"``) without them; any other field as it is."""
    inside = field[1:-1]
    if len(field) > 1 and field[0] == field[-1] == '"' and '"' not in inside.replace('""', ""):
        return inside.replace('""', '"')
    return field


def _fields(raw: str, delimiter: str) -> list[str]:
    """A line's stripped fields: CSV quoting with commas; with tabs or ``|`` a field written whole in double quotes
    (a spreadsheet's TSV export) loses them; empty fields after the third (a trailing tab) are dropped."""
    if delimiter == ",":
        fields = [f.strip() for f in next(csv.reader([raw], delimiter=",", skipinitialspace=True), [])]
    else:
        fields = [_unquoted(f.strip()) for f in raw.split(delimiter)]
    while len(fields) > 3 and not fields[-1]:
        fields.pop()
    return fields


def _delimiter(raw: str) -> str | None:
    """The first of tab, ``|``, ``,`` that splits ``raw`` into three fields with no quote left in them (a quoted CSV
    field may hold a tab), else the first that splits it into three, else the first present."""
    present = [d for d in ("\t", "|", ",") if d in raw]
    three = [d for d in present if len(_fields(raw, d)) == 3]
    clean = [d for d in three if not any('"' in f for f in _fields(raw, d))]
    return (clean or three or present or [None])[0]


def read_triples(path: str | Path, delimiter: str | None = None) -> list[tuple[str, str, str]]:
    """``head, relation, tail`` per line from a text file.

    The delimiter is a tab, ``|`` (MetaQA's ``kb.txt``) or ``,`` (CSV quoting allowed): the first that splits the first
    data line into three fields unless given. Blank lines and ``#`` comments are skipped (a warning counts those that
    hold three fields with no space after the ``#``), and so are a header line (:data:`_HEADER_WORDS`, or of
    one-letter words only ``h,r,t``, so ``s,p,o`` can be a fact) and its repeats. Lines end at ``\n``, ``\r\n`` or
    ``\r`` (a form feed or U+0085 inside a name stays in it).

    Raises:
        GraphFormatError: naming the file and line of an unreadable file, a line without exactly three fields, an
            empty field, a CSV quote left open, or a file with no triple.
    """
    text, path = _open_text(path), Path(path)
    triples: list[tuple[str, str, str]] = []
    names = {"\t": "tabs", "|": "'|'", ",": "commas"}
    commented: list[int] = []
    header = None
    for lineno, raw in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        if not raw.strip():
            continue
        if raw.lstrip().startswith("#"):
            rest = raw.lstrip()[1:]  # "#MeToo<TAB>...": a name, perhaps; "# a note, or two, here" is prose
            if rest[:1].strip() and len(_fields(rest, delimiter or _delimiter(raw) or "\t")) == 3:
                commented.append(lineno)
            continue
        if delimiter is None:
            delimiter = _delimiter(raw)
            if delimiter is None:
                raise GraphFormatError(f"{path}:{lineno}: cannot tell the delimiter: expected 'head<TAB>relation<TAB>"
                                       f"tail' (or separated by '|' or ','), got {raw[:80]!r}")
        fields = _fields(raw, delimiter)
        if delimiter == "," and '"' in raw:  # the csv module reads an open quote to the line's end without a word
            try:
                next(csv.reader([raw], skipinitialspace=True, strict=True), None)
            except csv.Error as err:
                if "unexpected end of data" in str(err):  # (strict mode's other complaints, `"b" ,c`, are harmless)
                    raise GraphFormatError(f"{path}:{lineno}: a quoted field is not closed: close its quote, and "
                                           f"write a quote inside it twice: {raw[:80]!r}") from None
        if len(fields) != 3:
            raise GraphFormatError(f"{path}:{lineno}: expected 3 fields (head, relation, tail) separated by "
                                   f"{names.get(delimiter, repr(delimiter))}, found {len(fields)}: {raw[:80]!r}")
        if not triples or header:  # the first line's header, and its repeats (concatenated files)
            # read from the fields as written: a quoted "head" (write_triples' escape) is a name
            bare = [f.lower() for f in (fields if delimiter == "," else [f.strip() for f in raw.split(delimiter)][:3])]
            if (not triples and _is_header(bare)) or bare == header:
                header = bare
                continue
        for name, value in zip(("head", "relation", "tail"), fields):
            if not value:
                raise GraphFormatError(f"{path}:{lineno}: field '{name}' is empty: {raw[:80]!r}")
        triples.append((fields[0], fields[1], fields[2]))
    if not triples:
        raise GraphFormatError(f"{path}: no triple found (expected lines 'head<TAB>relation<TAB>tail')")
    if commented:
        warnings.warn(f"{path}: {len(commented)} line(s) starting with '#' hold three fields and were skipped as "
                      f"comments (first: line {commented[0]})", stacklevel=2)
    return triples


def graph_from_triple_list(triples: Iterable[Sequence] | pd.DataFrame) -> TextualGraph:
    """A textual graph with one node per distinct entity string (case kept: the KB's own names, as MetaQA's); a
    triple given twice is one fact (a warning counts them).

    Args:
        triples: ``(head, relation, tail)`` of texts or numbers (a list, a generator, an array, or a three-column
            DataFrame, read row by row).

    Raises:
        GraphFormatError: naming the triple (by position) that is not three texts or finite numbers, or has an empty
            one.
    """
    if isinstance(triples, pd.DataFrame):
        if triples.shape[1] != 3:
            raise GraphFormatError(f"a DataFrame of triples needs 3 columns (head, relation, tail), got "
                                   f"{list(triples.columns)}")
        triples = triples.itertuples(index=False, name=None)
    checked: dict[tuple, None] = {}  # in order, each triple once
    total = 0
    for k, triple in enumerate(triples):
        if isinstance(triple, (str, bytes)) or not hasattr(triple, "__len__") or len(triple) != 3:
            raise GraphFormatError(f"triple {k}: expected (head, relation, tail), got {triple!r:.80}")
        fields = []
        for name, value in zip(("head", "relation", "tail"), triple):
            if isinstance(value, bool) or not isinstance(value, (str, int, float, np.integer, np.floating)) or \
                    (isinstance(value, (float, np.floating)) and not np.isfinite(value)):  # NaN: a missing value
                raise GraphFormatError(f"triple {k}: field '{name}' must be text, got {value!r:.40} "
                                       f"({type(value).__name__})")
            if not str(value).strip():
                raise GraphFormatError(f"triple {k}: field '{name}' is empty: {triple!r:.80}")
            fields.append(str(value).strip())
        checked.setdefault(tuple(fields))
        total = k + 1
    if total > len(checked):
        warnings.warn(f"{total - len(checked)} repeated triple(s) kept once", stacklevel=2)
    return graph_from_triples(list(checked), lowercase=False)


def read_graph_csv(nodes_path: str | Path, edges_path: str | Path) -> TextualGraph:
    """The GraphQA table pair (GR Table 9): ``node_id,node_attr`` and ``src,edge_attr,dst`` CSV files.

    Raises:
        GraphFormatError: naming the file, line and field of a missing column, a non-integer or repeated node id, or
            an edge whose endpoint is not a node.
    """
    tables = []  # a list: one file may hold both tables
    for path, columns in ((nodes_path, NODE_COLUMNS), (edges_path, EDGE_COLUMNS)):
        text, path = _open_text(path), Path(path)
        reader = csv.DictReader(io.StringIO(text))
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise GraphFormatError(f"{path}:1: header lacks column(s) {missing} (found {reader.fieldnames})")
        rows = []
        for row in reader:
            line = reader.line_num
            # csv's rest key: more fields than the header names; empty ones are a spreadsheet's trailing commas
            if any(v.strip() for v in row.get(None, ())):
                raise GraphFormatError(f"{path}:{line}: {len(reader.fieldnames) + len(row[None])} fields, the header "
                                       f"has {len(reader.fieldnames)} (quote a name that holds a comma)")
            values = []
            for c in columns:
                v = row.get(c)
                if v is None:
                    raise GraphFormatError(f"{path}:{line}: field '{c}' is missing")
                if c in ("node_attr", "edge_attr") and not v.strip():
                    raise GraphFormatError(f"{path}:{line}: field '{c}' is empty")
                if c in ("node_id", "src", "dst"):
                    try:
                        v = int(v)
                    except ValueError:
                        raise GraphFormatError(f"{path}:{line}: field '{c}' must be an integer node id, "
                                               f"got {v!r}") from None
                    if not -2 ** 63 <= v < 2 ** 63:
                        raise GraphFormatError(f"{path}:{line}: field '{c}' = {v} is out of the int64 range")
                values.append(v)
            rows.append((line, values))
        tables.append((path, rows))
    (npath, nrows), (epath, erows) = tables
    seen: dict[int, int] = {}
    for line, (nid, _) in nrows:
        if nid in seen:
            raise GraphFormatError(f"{npath}:{line}: field 'node_id' repeats id {nid} (first on line {seen[nid]})")
        seen[nid] = line
    for line, (s, _, d) in erows:
        for name, v in (("src", s), ("dst", d)):
            if v not in seen:
                raise GraphFormatError(f"{epath}:{line}: field '{name}' names node {v}, which is not in {npath}")
    if not nrows:
        raise GraphFormatError(f"{npath}: no node")
    nodes = pd.DataFrame([v for _, v in nrows], columns=NODE_COLUMNS).astype({"node_id": np.int64, "node_attr": str})
    edges = pd.DataFrame([v for _, v in erows], columns=EDGE_COLUMNS).astype({"src": np.int64, "edge_attr": str,
                                                                              "dst": np.int64})
    return TextualGraph(nodes, edges)


def load_graph(spec: str) -> tuple[TextualGraph, str]:
    """A graph named by a short spec: ``metaqa`` (the MetaQA KB), ``metaqa:<entity>`` (the KB's 2-hop neighbourhood of
    that entity, as the chat scopes a turn: hubs of more than 200 facts kept but not expanded, at most 2,000 nodes),
    ``webqsp_full:<i>``, ``webqsp:<i>``, ``explagraphs:<i>``, ``clevr:<i>`` (the i-th question's graph), a triples
    file path, or ``nodes.csv,edges.csv``.

    Returns:
        ``(graph, kind)``: the kind (``kg``, ``scene``, ``explanation``) serves checkpoint choice and templates.
    """
    name, _, arg = spec.partition(":")
    if spec == "metaqa":
        return graph_from_triple_list(read_triples(data_file("metaqa", "kb.txt"), "|")), "kg"
    if name == "metaqa" and arg:
        # a part of the KB to open as a graph of its own: indexing it takes seconds, the whole KB a minute or more
        kg = load_metaqa_kb()
        if arg not in kg.entity_id:
            raise ValueError(f"graph spec {spec!r}: the MetaQA KB has no entity named {arg!r} (names are case "
                             f"sensitive, as the KB writes them)")
        g = kg.subgraph(*kg.neighbourhood([kg.entity_id[arg]], ChatConfig().scope))
        return TextualGraph(g.nodes[NODE_COLUMNS], g.edges[EDGE_COLUMNS], graph_id=spec), "kg"
    if name in ("webqsp_full", "webqsp", "explagraphs", "clevr", "gqa_micro") and arg.isdigit():
        ds = load_dataset(name)
        i = int(arg)
        if i >= len(ds):
            raise ValueError(f"graph spec {spec!r}: {name} has {len(ds)} graphs")
        g = ds.graph(i)
        kind = "kg" if name.startswith("webqsp") else "explanation" if name == "explagraphs" else "scene"
        return TextualGraph(g.nodes[NODE_COLUMNS], g.edges[EDGE_COLUMNS], graph_id=f"{name}:{i}"), kind
    if "," in spec and not Path(spec).exists():
        nodes, edges = spec.split(",", 1)
        if not (Path(nodes).exists() or Path(edges).exists()):
            raise GraphFormatError(f"{spec}: no such file (nor the table pair {nodes!r}, {edges!r})")
        return read_graph_csv(nodes, edges), "kg"
    if not Path(spec).exists():
        raise GraphFormatError(f"{spec}: no such file, nor a graph name (metaqa, metaqa:<entity>, webqsp_full:<i>, "
                               f"webqsp:<i>, explagraphs:<i>, clevr:<i>)")
    return graph_from_triple_list(read_triples(spec)), "kg"


def write_triples(triples, path: str | Path) -> Path:
    """Write ``(head, relation, tail)`` triples as a tab-separated file with a header (atomic), the format
    :func:`read_triples` and the command line read back unchanged: a field starting with a quote or ``#``, or with
    spaces around it, and every field of a fact that reads as a header, is written in CSV quotes.

    Raises:
        ValueError: no triple, a field that is not text, or one that is empty or holds a tab or line break (no such
            file could be read back).
    """
    def line(triple: tuple[str, str, str]) -> str:
        quote = _is_header(list(triple))  # a fact that reads as a header is written quoted
        return "\t".join('"' + x.replace('"', '""') + '"' if quote or x[:1] in ('"', "#") or x != x.strip() else x
                         for x in triple) + "\n"

    triples = list(triples)  # read twice: checked, then written
    if not triples:
        raise ValueError("write_triples: no triple to write (read_triples refuses a file without one)")
    for h, r, t in triples:
        if not all(isinstance(x, str) for x in (h, r, t)):
            raise ValueError(f"write_triples writes text fields: {(h, r, t)!r}")
        if any(re.search(r"[\t\r\n]", x) or not x.strip() for x in (h, r, t)):
            raise ValueError(f"a triple field is empty or contains a tab or line break: {(h, r, t)!r}")
    return atomic_write_text(path, "head\trelation\ttail\n" + "".join(line(tr) for tr in triples))
