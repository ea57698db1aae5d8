"""The recipe report over seeds (bench/recipe.py), on run directories written here."""
import json

import pytest



def _run(root, name, right, seed=0, hist=None):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "predictions.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "score": float(c)}) + "\n"
                                                 for i, c in enumerate(right)))
    (d / "metrics.json").write_text(json.dumps({"name": name, "seed": seed, "best_epoch": 2,
                                                "precision": {"dtype": "bfloat16", "cpu_model": "X"}}))
    if hist:
        (d / "history.json").write_text(json.dumps(hist))


def test_the_recipe_report_judges_every_seed_and_the_mean(bench, tmp_path):
    report, seed_runs = bench("recipe").report, bench("recipe").seed_runs
    n = 200
    for k, r in enumerate((150, 140, 120)):  # 0.75, 0.70, 0.60
        _run(tmp_path, f"explagraphs-g_retriever-seed{k}", [1] * r + [0] * (n - r), k,
             [{"val_loss": 0.4, "val_match": 0.5}, {"val_loss": 0.35, "val_match": 0.6}])
    _run(tmp_path, "explagraphs-majority-seed0", [1] * 110 + [0] * 90)  # 0.55
    for k in range(3):
        _run(tmp_path, f"explagraphs-gnn_classifier-seed{k}", [0] * 70 + [1] * 130, k)  # 0.65, other questions
    other = tmp_path / "other"
    for k, r in enumerate((100, 110, 105)):
        _run(other, f"explagraphs-g_retriever-2ep-seed{k}", [1] * r + [0] * (n - r), k)
    assert [d.name for d in seed_runs(tmp_path, "explagraphs", "g_retriever")] == [
        f"explagraphs-g_retriever-seed{k}" for k in range(3)]
    r = report(tmp_path, "g_retriever", compare=[("2 epochs", other, "g_retriever-2ep")], out=tmp_path / "out")
    rec = r["recipe"]
    assert [s["test"] for s in rec["seeds"]] == [0.75, 0.7, 0.6] and rec["mean"] == pytest.approx(0.6833, abs=1e-4)
    assert r["majority"] == 0.55
    # seed 2: 120 / 200, Wilson lower end 0.531 < 0.55: not every seed clears the majority class
    assert [s["above_majority"] for s in rec["seeds"]] == [True, True, False] and rec["all_above_majority"] is False
    assert rec["seeds"][0]["val_match"] == [0.5, 0.6] and rec["seeds"][0]["dtype"] == "bfloat16"
    maj = r["references"]["majority"]
    assert maj["seeds"] == 3 and maj["score_b"] == 0.55 and maj["verdict"] == "reproduced"
    assert r["references"]["gnn_classifier"]["score_b"] == 0.65
    sch = r["schedules"]["2 epochs"]
    assert sch["mean"] == pytest.approx(0.525) and sch["against_recipe"]["diff"] == pytest.approx(0.6833 - 0.525,
                                                                                                    abs=1e-4)
    assert "p_seeds" in sch["against_recipe"]
    assert json.loads((tmp_path / "out" / "recipe.json").read_text())["recipe"]["mean"] == rec["mean"]
    with pytest.raises(FileNotFoundError, match="graph_token"):
        report(tmp_path, "graph_token")
