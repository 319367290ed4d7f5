"""The transaction history checker (txn_history.py) finds each anomaly it looks for, on
histories made by hand, and none on a clean one; no broker needed."""

from txn_history import History, check, value_of


def clean():
    history = History(committed={"t1", "t2"}, aborted={"t3"})
    final = [(0, 0, value_of("t1", 0, 2)), (1, 0, value_of("t1", 1, 2)), (0, 2, value_of("t2", 0, 1))]
    history.read_live = list(final)
    history.read_by_group = list(final)
    history.group_offsets = {0: 3, 1: 1}
    return history, final


def test_a_clean_history_has_no_anomaly():
    assert check(*clean()) == []


def test_each_anomaly_is_found():
    history, final = clean()
    cases = {
        "aborted read": (history, final + [(1, 5, value_of("t3", 0, 1))]),
        "duplicated": (history, final + [(1, 6, value_of("t2", 0, 1))]),
        "seen in part": (history, [r for r in final if r[2] != value_of("t1", 1, 2)]),
        "lost": (history, [r for r in final if not r[2].startswith(b"t2")]),
    }
    for anomaly, (h, f) in cases.items():
        assert any(anomaly in found for found in check(h, f)), anomaly
    skipping, final = clean()
    skipping.read_by_group = [r for r in final if r[1] != 0 or r[0] != 0]
    assert any("skip" in found for found in check(skipping, final))
    backwards, final = clean()
    backwards.read_live = [final[2], final[0], final[1]]
    assert any("live reader" in found for found in check(backwards, final))
