"""The docs say only what exists and which machine a number comes from (issue 14, item 15)."""

from __future__ import annotations

import re
import sys

import pytest

from repo_paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))


def test_every_benchmark_prints_its_machine_first():
    scripts = [p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")]
    assert scripts
    for script in scripts:
        text = script.read_text()
        main = text[text.index("def main("):]
        assert "_machine.header()" in main, f"{script.name} does not print the machine it ran on"


def test_the_machine_header_names_cpu_flags_and_measured_ceilings():
    from attnlab.measure import machine

    header = machine.header()
    assert header.startswith("CPU: ") and "flags:" in header and "torch " in header
    fp32, bf16 = (float(x.replace(",", "")) for x in re.findall(r"(?:fp32|bf16) ([\d,.]+) GFLOP/s", header))
    assert fp32 > 0 and bf16 > 0


def test_lectures_list_what_is_built_above_and_what_is_not_yet_below():
    lectures = (ROOT / "docs" / "lectures.md").read_text()
    start, end = lectures.index("## From the lectures to the code"), lectures.index("### Not yet implemented")
    built = lectures[start:end]
    for concept, code in (("Cho et al. 2014", "RNNSeq2Seq"), ("Bahdanau attention", "AttentionSeq2Seq"),
                          ("Luong", "Alignment"), ("LSTMN", "LSTMN")):
        row = next(line for line in built.splitlines() if concept in line)
        assert code in row, f"docs/lectures.md: the {concept!r} row does not name {code}"


def test_lectures_list_what_is_not_built_yet():
    lectures = (ROOT / "docs" / "lectures.md").read_text()
    not_yet = lectures[lectures.index("### Not yet implemented"):]
    built = lectures[:lectures.index("### Not yet implemented")]
    issue_18 = (("PCA", "labs/pca_autoencoder.py"), ("recurrent and convolutional rows", "recurrent_flops"),
                ("browser", "attnlab serve"))
    for concept, code in issue_18:
        rows = [line for line in built.splitlines() if concept in line and code in line]
        assert rows and concept not in not_yet, f"docs/lectures.md: {concept!r} is built, in {code}"
    assert "Neural Turing Machines" in built and "Neural Turing" not in not_yet  # issue 16
    assert "Show, Attend and Tell" in built and "Show, Attend" not in not_yet  # issue 17


@pytest.mark.parametrize(
    ("path", "claim"),
    [
        ("README.md", "the whole attention family"),
        ("README.md", "maps every concept"),
        ("README.md", "All measured on this 2-core machine (AVX-512 + AMX"),
        ("src/attnlab/attention/masks.py", "softmax((QKᵀ + M)"),
        ("src/attnlab/analysis.py", "The lectures' complexity tables, made exact:"),
    ],
)
def test_claims_that_said_more_than_exists_are_gone(path, claim):
    assert claim not in (ROOT / path).read_text()


def test_masks_write_the_decks_formula():
    assert "softmax(QKᵀ / √d_k + M)" in (ROOT / "src" / "attnlab" / "attention" / "masks.py").read_text()


DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
DOC_PATH = re.compile(r"\b((?:docs|configs|benchmarks|tests|src)/[\w./-]+\.(?:md|toml|py|png|json))")
PLACEHOLDER = re.compile(r"\.\.\.|my_?model|my_recipe")  # design.md's how-to-add-a-model example


@pytest.mark.parametrize("doc", DOCS)
def test_files_the_docs_name_exist(doc):
    path = ROOT / doc
    cited = {m for m in DOC_PATH.findall(path.read_text(encoding="utf-8")) if not PLACEHOLDER.search(m)}
    missing = sorted(m for m in cited if not (ROOT / m).exists())
    assert not missing, f"{doc} names {missing}, which are not in the repository"


MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")  # [text](target), anchor dropped


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_in_the_docs_resolve(doc):
    path = ROOT / doc
    links = MARKDOWN_LINK.findall(path.read_text(encoding="utf-8"))
    targets = {t for t in links if not re.match(r"[a-z]+:", t)}  # not http:, mailto:
    missing = sorted(t for t in targets if not (path.parent / t).exists())
    assert not missing, f"{doc} links to {missing}, which are not in the repository"
