"""The benchmark metrics against values worked out by hand (no rank-bm25, no corpora)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

# bench/ is not part of the package; load its helpers by path under a name of their own.
_PATH = Path(__file__).resolve().parents[2] / "bench" / "common.py"
_SPEC = importlib.util.spec_from_file_location("vault_brain_bench_common", _PATH)
common = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = common
_SPEC.loader.exec_module(common)


def test_ndcg_is_one_for_an_ideal_ranking():
    assert common.ndcg_at_k(["a", "b", "x"], {"a": 1, "b": 1}) == pytest.approx(1.0)


def test_ndcg_binary_matches_hand_computed_value():
    # DCG = 1 + 1/log2(4); IDCG = 1 + 1/log2(3)
    expected = (1 + 1 / 2) / (1 + 1 / math.log2(3))
    assert common.ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1}) == pytest.approx(expected)


def test_ndcg_uses_graded_gains():
    # DCG = 1 + 3/log2(3); IDCG = 3 + 1/log2(3)
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert common.ndcg_at_k(["b", "a"], {"a": 3, "b": 1}) == pytest.approx(expected)


def test_ndcg_ignores_hits_below_the_cutoff():
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert common.ndcg_at_k(ranked, {"a": 1}) == 0.0


def test_ndcg_ideal_is_cut_at_k_when_more_docs_are_relevant():
    gains = {f"d{i}": 1 for i in range(12)}
    assert common.ndcg_at_k([f"d{i}" for i in range(10)], gains) == pytest.approx(1.0)


def test_recall_counts_relevant_docs_found_in_top_k():
    assert common.recall_at_k(["x", "a", "y"], {"a": 1, "b": 1, "c": 2}) == pytest.approx(1 / 3)


def test_mrr_is_inverse_rank_of_first_relevant_hit():
    assert common.mrr_at_k(["x", "y", "a", "b"], {"a": 1, "b": 1}) == pytest.approx(1 / 3)


def test_mrr_is_zero_without_a_relevant_hit_in_top_k():
    assert common.mrr_at_k([f"x{i}" for i in range(10)] + ["a"], {"a": 1}) == 0.0


def test_a_doc_retrieved_twice_counts_once_at_its_best_rank():
    assert common.mrr_at_k(["x", "x", "a"], {"a": 1}) == pytest.approx(1 / 2)


def test_percentile_interpolates_between_ranks():
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert common.percentile(values, 50) == 3.0
    assert common.percentile(values, 95) == pytest.approx(4.8)


def test_doc_with_title_becomes_a_note_headed_by_it():
    doc = common.Doc("7", "Wing flutter", "Some text.")
    assert common.note_text(doc) == "# Wing flutter\n\nSome text.\n"


def test_doc_without_title_becomes_just_its_text():
    assert common.note_text(common.Doc("7", "", "Some text.")) == "Some text.\n"


def test_note_path_maps_back_to_doc_id():
    assert common.doc_id_of("sub/31715818.md") == "31715818"


def test_qrels_keep_only_positive_judgments(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("query-id\tcorpus-id\tscore\n1\t10\t2\n1\t11\t0\n2\t12\t1\n")
    assert common.load_qrels(path) == {"1": {"10": 2.0}, "2": {"12": 1.0}}
