import json

import pytest

from gr_core.runs import atomic_write_text, config_hash, progress, unpickle_verified, write_json


@pytest.mark.parametrize("mode", ["off", "plain", "auto"])
def test_progress_accepts_a_caller_disable_flag_in_every_mode(monkeypatch, mode):
    monkeypatch.setenv("GR_PROGRESS", mode)
    assert list(progress(range(3), disable=True)) == [0, 1, 2]
    assert list(progress(range(2), desc="x")) == [0, 1]


@pytest.mark.parametrize("mode", ["off", "plain", "auto"])
def test_progress_over_a_shuffling_loader_keeps_its_order_in_every_mode(monkeypatch, mode):
    """A bar makes one iterator of what it wraps (tqdm.auto made two: a shuffling DataLoader then skipped one of its
    generator's permutations each epoch, and a reasoner trained differently in a terminal than under the suite)."""
    import torch
    from torch.utils.data import DataLoader

    monkeypatch.setenv("GR_PROGRESS", mode)
    order = [[int(x) for x in batch] for batch in DataLoader(list(range(10)), batch_size=3, shuffle=True,
                                                              generator=torch.Generator().manual_seed(0))]
    loader = DataLoader(list(range(10)), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0))
    assert [[int(x) for x in batch] for batch in progress(loader, desc="epoch")] == order


def test_atomic_write_leaves_no_temp_file_and_replaces_whole(tmp_path):
    path = tmp_path / "a" / "result.json"
    write_json(path, {"b": 1, "a": [1, 2]})
    atomic_write_text(path, '{"c": 3}\n')
    assert json.loads(path.read_text()) == {"c": 3}
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_atomic_files_get_the_mode_open_would_give_and_tables_are_written_whole(tmp_path):
    import os

    import pandas as pd

    from gr_core.runs import write_csv

    path = write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path / "t.csv")
    assert path.read_text() == "a\n1\n2\n" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600: shared caches stay readable


def test_a_model_folder_is_known_by_its_files_names_and_sizes(tmp_path):
    from gr_core.runs import folder_identity

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"12345")
    first = folder_identity(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"54321")  # rewritten, same size: the same identity
    assert folder_identity(tmp_path / "m") == first
    (tmp_path / "m" / "model.safetensors").write_bytes(b"123456")
    assert folder_identity(tmp_path / "m") != first


def test_config_hash_is_stable_and_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_a_finished_run_of_another_configuration_is_never_overwritten(tmp_path):
    from gr_core.runs import RunConflictError, check_run_identity, write_json

    run_dir = tmp_path / "webqsp-g_retriever-seed0"
    old = {"train": {"lr": 1e-5, "num_epochs": 2, "betas": (0.9, 0.95)}, "max_train": 16}
    assert check_run_identity(run_dir, old, "aaa") is False  # nothing there yet
    write_json(run_dir / "config.json", {"name": run_dir.name, "config_hash": "aaa", **old})
    write_json(run_dir / "metrics.json", {"config_hash": "aaa"})
    assert check_run_identity(run_dir, old, "aaa") is True  # the same configuration: reused
    with pytest.raises(RunConflictError, match=r"config hash aaa, this one bbb; differing: train.lr: 1e-05 -> 0.001\)"):
        # only the field that differs is named: the tuple stored as a JSON list is the same value
        check_run_identity(run_dir, {**old, "train": {**old["train"], "lr": 1e-3}}, "bbb")
    # a run recorded before its inputs is taken as it is; one recorded with them is checked against them
    assert check_run_identity(run_dir, old, "aaa", {"data": "d1", "llm": "m1"}) is True
    write_json(run_dir / "metrics.json", {"config_hash": "aaa", "inputs": {"data": "d1", "llm": "m1"}})
    assert check_run_identity(run_dir, old, "aaa", {"data": "d1", "llm": "m1"}) is True
    with pytest.raises(RunConflictError, match=r"made from other inputs \(llm: m1 -> m2\)"):
        check_run_identity(run_dir, old, "aaa", {"data": "d1", "llm": "m2"})


def test_a_keyed_result_is_reused_only_under_the_key_that_made_it(tmp_path):
    from gr_core.runs import read_keyed, write_keyed

    key = {"cfg": {"lr": 2e-3, "hops": (1, 2)}, "data": "abc"}
    path = tmp_path / "step.json"
    assert read_keyed(path, key) is None  # nothing there yet
    write_keyed(path, key, {"rows": [{"a": 1}]})
    assert read_keyed(path, {"data": "abc", "cfg": {"hops": (1, 2), "lr": 2e-3}}) == {"rows": [{"a": 1}]}
    assert read_keyed(path, {**key, "data": "abd"}) is None  # other data: recomputed, never reused
    path.write_text('{"key_hash": ')  # a truncated file reads as absent
    assert read_keyed(path, key) is None


def test_a_frame_kept_with_a_key_reads_back_with_its_columns_even_when_empty(tmp_path):
    import pandas as pd

    from gr_core.runs import frame_value, read_keyed, value_frame, write_keyed

    table = pd.DataFrame({"dataset": ["webqsp", "metaqa-1hop"], "h1": [68.1, 94.5], "n": [1628, 326]})
    empty = table.iloc[:0]
    write_keyed(tmp_path / "t.json", "k", frame_value(table, "table", "table_columns") | frame_value(empty))
    done = read_keyed(tmp_path / "t.json", "k")
    # the layout notebook 04's saved change tables and answers already have on disk (a rerun reads them back)
    assert set(done) == {"table", "table_columns", "rows", "columns"}
    assert done["table_columns"] == ["dataset", "h1", "n"] and done["table"][0] == {"dataset": "webqsp", "h1": 68.1,
                                                                                     "n": 1628}
    pd.testing.assert_frame_equal(value_frame(done, "table", "table_columns"), table)
    back = value_frame(done)
    assert list(back.columns) == ["dataset", "h1", "n"] and len(back) == 0


def test_records_are_gzipped_by_their_name_and_the_same_rows_give_the_same_bytes(tmp_path):
    import pandas as pd

    from gr_core.runs import write_records

    rows = pd.DataFrame({"dataset": ["webqsp"] * 3, "index": [4, 8, 15], "hit": [1.0, 0.0, 1.0]})
    a, b = write_records(rows, tmp_path / "a.jsonl.gz"), write_records(rows, tmp_path / "b.jsonl.gz")
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:2] == b"\x1f\x8b"  # gzip, no header time
    pd.testing.assert_frame_equal(pd.read_json(a, lines=True), rows, check_dtype=False)  # JSON writes 1.0 as 1
    plain = write_records(rows, tmp_path / "c.jsonl")  # plain text otherwise
    assert plain.read_bytes()[:1] == b"{" and len(pd.read_json(plain, lines=True)) == 3


def test_a_verified_pickle_is_read_once_per_state_of_its_file_and_never_trusted_when_changed(tmp_path):
    import hashlib
    import pickle

    def save(name, obj):
        data = pickle.dumps(obj)
        (tmp_path / name).write_bytes(data)
        return tmp_path / name, len(data), hashlib.sha256(data).hexdigest()

    path, size, sha = save("a.pkl", {"x": [1, 2]})
    first = unpickle_verified(path, size, sha)
    assert first == {"x": [1, 2]} and unpickle_verified(path, size, sha) is first  # kept: the same object
    assert unpickle_verified(path, size, sha, keep_bytes=0) is first  # a kept state is returned whatever the limit
    assert unpickle_verified(path, size, "0" * 64) is None and unpickle_verified(path, size + 1, sha) is None
    big, bsize, bsha = save("big.pkl", list(range(100)))
    assert unpickle_verified(big, bsize, bsha, keep_bytes=10) is not unpickle_verified(big, bsize, bsha, keep_bytes=10)
    path, size, sha = save("a.pkl", {"x": [3]})  # rewritten: read again
    assert unpickle_verified(path, size, sha) == {"x": [3]}
    with open(path, "r+b") as fh:
        fh.truncate(5)
    assert unpickle_verified(path, size, sha) is None  # truncated after it was kept: never trusted
    others = [save(f"{i}.pkl", i) for i in range(4)]
    for p, n, h in others:
        unpickle_verified(p, n, h, keep=4)
    assert unpickle_verified(*others[-1]) is unpickle_verified(*others[-1])


def test_seeds_are_integers_in_numpys_range():
    from gr_core.runs import check_seed

    import numpy as np

    check_seed(0), check_seed(2 ** 32 - 1), check_seed(np.int64(3))  # numpy's integers too
    for bad in (-1, 2 ** 32, 3.5, True, "1"):
        with pytest.raises(ValueError, match="seeds are integers from 0 to 2"):
            check_seed(bad, "-p seed")
