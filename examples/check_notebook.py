"""Executes examples/analyst.ipynb and checks what it printed and drew: the answer cell's
output holds the totals of the uploaded CSV, and the plot cell produced a PNG image.

    python examples/check_notebook.py [--save OUT.ipynb]

Needs nbclient, nbformat and ipykernel (and the notebook's own matplotlib and ba_agent)."""

from __future__ import annotations

import pathlib
import sys

import nbclient
import nbformat

HERE = pathlib.Path(__file__).resolve().parent
EXPECTED = ["- East: 430.5", "- North: 2000", "- South: 1100", "- West: 610"]


def cell(nb: nbformat.NotebookNode, tag: str) -> nbformat.NotebookNode:
    for c in nb.cells:
        if tag in c.get("metadata", {}).get("tags", []):
            return c
    raise SystemExit(f"no cell tagged {tag!r} in the notebook")


def text_of(c: nbformat.NotebookNode) -> str:
    parts = []
    for out in c.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out and "text/plain" in out.data:
            parts.append(out.data["text/plain"])
    return "".join(parts)


def main() -> int:
    nb = nbformat.read(HERE / "analyst.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
    ).execute()
    if len(sys.argv) == 3 and sys.argv[1] == "--save":
        nbformat.write(nb, sys.argv[2])
    problems = []
    answer = text_of(cell(nb, "answer"))
    if not answer.startswith("answered"):
        problems.append(f"the run did not answer: {answer!r}")
    problems += [f"the answer lacks {line!r}: {answer!r}" for line in EXPECTED if line not in answer]
    plot = cell(nb, "plot")
    if not any("image/png" in out.get("data", {}) for out in plot.outputs):
        problems.append("the plot cell drew no PNG image")
    if "'North': 2000.0" not in text_of(plot):
        problems.append(f"the plotted figures are not the answer's: {text_of(plot)!r}")
    for p in problems:
        print(f"notebook: {p}", file=sys.stderr)
    if not problems:
        print("notebook: the answer gave the totals and the plot cell drew them")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
