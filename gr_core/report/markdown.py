"""Markdown for the generated reports (``report.md``, ``RESULTS.md``): one table writer for every table."""
from __future__ import annotations

import pandas as pd


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (what ``DataFrame.to_markdown`` gives, without the tabulate dependency)."""
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and v != v):
            return ""
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 1000 or (v == int(v) and abs(v) >= 100) else f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule] + body)
