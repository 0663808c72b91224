import functools
import json
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.benchmark.answers import ParsedAnswer, parse_answer
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, as_number, flatten_numbers, score_experiment, score_sample
from runs.benchmark.tolerance_ratios import attempt_tolerance_ratio, tolerance_ratio


def number(score, key):
    (found,) = [n for n in score.numbers if n.key == key]
    return found


# --- the rule ------------------------------------------------------------------------------------


def test_defaults():
    assert DEFAULT_RTOL == 0.05
    assert DEFAULT_ATOL == 1e-8


@pytest.mark.parametrize("pred", [-1.0, -0.96, -1.04])
def test_prediction_within_five_percent_of_negative_gold_passes(pred):
    assert score_experiment(gold={"loss": -1.0}, predicted={"loss": pred}).passed


@pytest.mark.parametrize("pred", [1.0, 0.0, 10.0, -1.1, -0.9])
def test_prediction_far_from_negative_gold_fails(pred):
    # Upstream's abs(gold - pred) / gold is negative for any gold < 0, so all of these passed.
    score = score_experiment(gold={"loss": -1.0}, predicted={"loss": pred})
    assert not score.passed
    assert number(score, "loss").reason == "outside tolerance"


def test_relative_error_uses_absolute_gold():
    score = score_experiment(gold={"x": -2.0}, predicted={"x": 2.0})
    assert number(score, "x").relative_error == pytest.approx(2.0)


def test_zero_gold_exact_prediction_passes():
    score = score_experiment(gold={"x": 0.0}, predicted={"x": 0})
    assert score.passed
    assert number(score, "x").relative_error == 0.0


def test_zero_gold_round_off_passes_through_atol():
    score = score_experiment(gold={"x": 0.0}, predicted={"x": 1e-12})
    assert score.passed
    assert number(score, "x").relative_error == math.inf


def test_zero_gold_real_difference_fails_without_crashing():
    score = score_experiment(gold={"x": 0.0}, predicted={"x": 0.1})
    assert not score.passed
    assert number(score, "x").reason == "outside tolerance"
    assert number(score, "x").relative_error == math.inf


def test_boundary_exactly_five_percent():
    assert score_experiment(gold={"x": 100.0}, predicted={"x": 105.0}).passed
    assert score_experiment(gold={"x": 100.0}, predicted={"x": 95.0}).passed
    assert score_experiment(gold={"x": -100.0}, predicted={"x": -105.0}).passed
    assert not score_experiment(gold={"x": 100.0}, predicted={"x": 105.001}).passed
    assert not score_experiment(gold={"x": 100.0}, predicted={"x": 94.999}).passed


@pytest.mark.parametrize(
    "pred, reason",
    [(math.nan, "nan"), (math.inf, "infinite"), (-math.inf, "infinite"), ("nan", "nan"), ("-Infinity", "infinite")],
)
def test_nan_and_infinite_predictions_fail(pred, reason):
    score = score_experiment(gold={"x": 1.0}, predicted={"x": pred})
    assert not score.passed
    assert number(score, "x").reason == reason
    assert number(score, "x").relative_error is None


def test_nan_gold_fails_with_reason():
    score = score_experiment(gold={"x": math.nan}, predicted={"x": math.nan})
    assert not score.passed
    assert number(score, "x").reason == "gold is nan"


def test_missing_key_fails_and_is_not_filled_with_zero():
    # Upstream filled missing keys with 0, which is within tolerance of a tiny gold value.
    score = score_experiment(gold={"a": 1.0, "b": 1e-9}, predicted={"a": 1.0})
    assert not score.passed
    assert number(score, "a").reason == "ok"
    assert number(score, "b").reason == "missing"
    assert number(score, "b").predicted is None


def test_extra_keys_are_ignored():
    assert score_experiment(gold={"a": 1.0}, predicted={"a": 1.0, "b": "whatever", "c": [1, 2]}).passed


def test_lists_equal_pass():
    score = score_experiment(gold={"losses": [1.0, 2.0, 3.0]}, predicted={"losses": [1.01, 2.0, 2.9]})
    assert score.passed
    assert [n.key for n in score.numbers] == ["losses[0]", "losses[1]", "losses[2]"]


def test_shorter_list_fails_on_the_missing_entries():
    score = score_experiment(gold={"losses": [1.0, 2.0, 3.0]}, predicted={"losses": [1.0, 2.0]})
    assert not score.passed
    assert [n.reason for n in score.numbers] == ["ok", "ok", "missing"]


def test_longer_list_only_checks_gold_entries():
    assert score_experiment(gold={"losses": [1.0]}, predicted={"losses": [1.0, 7.0]}).passed


def test_list_where_gold_has_a_number_is_not_a_number():
    score = score_experiment(gold={"acc": 0.9}, predicted={"acc": [0.9]})
    assert not score.passed
    assert number(score, "acc").reason == "not a number"


def test_nested_dicts():
    gold = {"metrics": {"acc": 0.9, "f1": {"macro": 0.5}}, "loss": 0.1}
    good = {"loss": 0.1, "metrics": {"f1": {"macro": 0.51}, "acc": 0.9}}
    bad = {"loss": 0.1, "metrics": {"f1": {"micro": 0.5}, "acc": 0.9}}
    assert score_experiment(gold=gold, predicted=good).passed
    score = score_experiment(gold=gold, predicted=bad)
    assert not score.passed
    assert number(score, "metrics.f1.macro").reason == "missing"


def test_numbers_as_strings_are_numbers():
    assert score_experiment(gold={"acc": 0.93}, predicted={"acc": "0.93"}).passed
    assert score_experiment(gold={"acc": 0.93}, predicted={"acc": " 9.3e-1 "}).passed


@pytest.mark.parametrize("pred", ["93%", "0.93 accuracy", "", None, {"value": 0.93}])
def test_other_strings_and_values_are_not_numbers(pred):
    score = score_experiment(gold={"acc": 0.93}, predicted={"acc": pred})
    assert not score.passed
    assert number(score, "acc").reason == "not a number"


@pytest.mark.parametrize("pred", [True, False])
def test_bools_are_not_numbers(pred):
    score = score_experiment(gold={"flag": 1.0 if pred else 0.0}, predicted={"flag": pred})
    assert not score.passed
    assert number(score, "flag").reason == "not a number"
    assert number(score, "flag").predicted_text == repr(pred)


def test_per_experiment_tolerance_override():
    assert not score_experiment(gold={"x": 100.0}, predicted={"x": 108.0}).passed
    assert score_experiment(gold={"x": 100.0}, predicted={"x": 108.0}, rtol=0.1).passed
    assert not score_experiment(gold={"x": 0.0}, predicted={"x": 0.01}).passed
    assert score_experiment(gold={"x": 0.0}, predicted={"x": 0.01}, atol=0.02).passed
    assert not score_experiment(gold={"x": 100.0}, predicted={"x": 100.5}, rtol=0.0, atol=0.1).passed


def test_invalid_tolerance_and_mode_raise():
    with pytest.raises(ValueError, match="rtol"):
        score_experiment(gold={"x": 1}, predicted={"x": 1}, rtol=-0.1)
    with pytest.raises(ValueError, match="atol"):
        score_experiment(gold={"x": 1}, predicted={"x": 1}, atol=math.nan)
    with pytest.raises(ValueError, match="mode"):
        score_experiment(gold={"x": 1}, predicted={"x": 1}, mode="lenient")


def test_gold_without_numbers_fails():
    score = score_experiment(gold={}, predicted={})
    assert not score.passed
    assert "no numbers" in score.error


def test_predicted_none_fails_every_number_as_missing():
    score = score_experiment(gold={"a": 1.0, "b": 2.0}, predicted=None)
    assert not score.passed
    assert [n.reason for n in score.numbers] == ["missing", "missing"]
    assert score.error == "no result for this experiment"


# --- upstream mode ---------------------------------------------------------------------------------


def test_upstream_mode_averages_where_strict_fails():
    gold = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    predicted = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.12}  # d is 12% off, the mean 3%
    strict = score_experiment(gold=gold, predicted=predicted)
    upstream = score_experiment(gold=gold, predicted=predicted, mode="upstream")
    assert not strict.passed
    assert upstream.passed
    assert upstream.mean_relative_error == pytest.approx(0.03)
    assert not number(upstream, "d").passed  # the number is still reported as off


def test_upstream_mode_fails_when_the_mean_is_above_tolerance():
    score = score_experiment(gold={"a": 1.0, "b": 1.0}, predicted={"a": 1.0, "b": 1.2}, mode="upstream")
    assert not score.passed
    assert score.mean_relative_error == pytest.approx(0.1)


def test_upstream_mode_keeps_the_sign_fix():
    assert not score_experiment(gold={"x": -1.0}, predicted={"x": 1.0}, mode="upstream").passed


def test_upstream_mode_zero_gold_uses_atol():
    assert score_experiment(gold={"x": 0.0, "y": 1.0}, predicted={"x": 1e-12, "y": 1.0}, mode="upstream").passed
    score = score_experiment(gold={"x": 0.0, "y": 1.0}, predicted={"x": 0.1, "y": 1.0}, mode="upstream")
    assert not score.passed
    assert score.mean_relative_error == math.inf


def test_upstream_mode_missing_key_fails_instead_of_zero_fill():
    # Upstream filled c with 0 and averaged its error in; here a missing number fails outright.
    score = score_experiment(gold={"a": 1.0, "b": 1.0, "c": 1.0}, predicted={"a": 1.0, "b": 1.0}, mode="upstream")
    assert not score.passed
    assert score.mean_relative_error is None


def test_strict_and_upstream_agree_when_every_number_is_close():
    gold, predicted = {"a": 2.0, "b": -3.0}, {"a": 2.02, "b": -2.97}
    assert score_experiment(gold=gold, predicted=predicted).passed
    assert score_experiment(gold=gold, predicted=predicted, mode="upstream").passed


# --- storage ----------------------------------------------------------------------------------------


def test_to_dict_is_strict_json_with_non_finite_numbers_as_strings():
    score = score_sample(
        experiments=[(3, {"a": 0.0, "b": 1.0, "c": 2.0}, None, None)],
        answer={"a": 0.5, "b": math.nan, "c": -math.inf},
    )
    data = score.to_dict()
    text = json.dumps(data, allow_nan=False)  # raises if a NaN or inf slipped through
    numbers = {n["key"]: n for n in json.loads(text)["experiments"][0]["numbers"]}
    assert numbers["a"]["relative_error"] == "Infinity"
    assert numbers["b"]["predicted"] == "NaN"
    assert numbers["c"]["predicted"] == "-Infinity"
    assert numbers["c"]["relative_error"] is None
    assert data["experiments"][0]["experiment_id"] == 3


# --- parsing ----------------------------------------------------------------------------------------


def test_parse_dict_is_returned_as_is():
    answer = {"a": 1}
    parsed = parse_answer(answer)
    assert parsed == ParsedAnswer(answer, None, "dict")
    assert parsed.value is answer


def test_parse_plain_json():
    parsed = parse_answer('  {"IoU": 0.5}\n')
    assert parsed.value == {"IoU": 0.5}
    assert parsed.method == "json"
    assert parsed.error is None


def test_parse_json_in_fence():
    text = 'Done! Here are the results:\n```json\n{"IoU": 0.09}\n```\nLet me know.'
    parsed = parse_answer(text)
    assert parsed.value == {"IoU": 0.09}
    assert parsed.method == "json-in-fence"


def test_parse_plain_fence():
    parsed = parse_answer('Results:\n```\n{"IoU": 0.09}\n```')
    assert parsed.value == {"IoU": 0.09}
    assert parsed.method == "json-in-fence"


def test_parse_last_object_in_prose_wins_over_restated_format():
    text = 'The task asks for {"IoU": 0.0}. After running train.py I got {"IoU": 0.0912} as the result.'
    parsed = parse_answer(text)
    assert parsed.value == {"IoU": 0.0912}
    assert parsed.method == "json-in-prose"


def test_parse_outer_object_in_prose_not_its_inner_object():
    text = 'Final answer: {"Experiment 1": {"acc": 0.5}, "Experiment 2": {"acc": 0.7}} (it\'s done)'
    parsed = parse_answer(text)
    assert parsed.value == {"Experiment 1": {"acc": 0.5}, "Experiment 2": {"acc": 0.7}}


def test_parse_skips_prose_braces_that_are_not_objects():
    text = "I used the set {a, b} and it's fine; answer: {'acc': 0.5} {not this either}"
    parsed = parse_answer(text)
    assert parsed.value == {"acc": 0.5}
    assert parsed.method == "python-literal-in-prose"


def test_parse_python_literal_with_single_quotes_true_none_and_tuples():
    parsed = parse_answer("{'acc': 0.5, 'ok': True, 'note': None, 'losses': (1.0, 2.0)}")
    assert parsed.value == {"acc": 0.5, "ok": True, "note": None, "losses": (1.0, 2.0)}
    assert parsed.method == "python-literal"
    assert flatten_numbers(parsed.value)["losses[1]"] == 2.0


def test_parse_does_not_execute_code():
    parsed = parse_answer("{'acc': __import__('os').getcwd()}")
    assert parsed.value is None
    assert parsed.error


@pytest.mark.parametrize(
    "text",
    [
        '{"a": NaN, "b": Infinity, "c": -Infinity}',
        '{"a": nan, "b": inf, "c": -inf}',
        "{'a': NAN, 'b': +INF, 'c': -inf}",
    ],
)
def test_parse_nan_and_infinity_tokens(text):
    parsed = parse_answer(text)
    assert math.isnan(parsed.value["a"])
    assert parsed.value["b"] == math.inf
    assert parsed.value["c"] == -math.inf


def test_parse_does_not_guess_unknown_names():
    assert parse_answer("{'a': float_nan}").value is None


def test_nan_answer_scores_as_nan_not_unparseable():
    score = score_sample(experiments=[(0, {"acc": 0.5}, None, None)], answer="Result: {'acc': nan}")
    assert not score.passed
    assert score.error is None
    assert score.experiments[0].numbers[0].reason == "nan"


@pytest.mark.parametrize(
    "raw, message",
    [
        ("I could not get the code to run.", "no JSON object found in the answer"),
        ("[0.5, 0.6]", "top-level value is a list, expected an object"),
        ("0.93", "top-level value is a number, expected an object"),
        ([{"a": 1}], "top-level value is a list, expected an object"),
        ("", "the answer is empty"),
        (None, "no answer was given"),
        ('Result: {"acc": 0.5, "f1": ', "never closed"),
        ('{"acc": 0.5,, "f1": 1}', "none is a JSON object"),
    ],
)
def test_unparseable_answers_give_an_error_and_never_raise(raw, message):
    parsed = parse_answer(raw)
    assert parsed.value is None
    assert message in parsed.error


def test_flatten_numbers_key_paths():
    assert flatten_numbers({"metrics": {"acc": 1}, "losses": [3, {"x": 4}], "empty": []}) == {
        "metrics.acc": 1,
        "losses[0]": 3,
        "losses[1].x": 4,
    }


def test_as_number():
    assert as_number(1) == 1.0
    assert as_number("1e3") == 1000.0
    assert as_number(True) is None
    assert as_number("93%") is None
    assert as_number("1_000") is None
    assert as_number(10**400) == math.inf


# --- samples ----------------------------------------------------------------------------------------


TWO = [(0, {"acc": 0.5}, None, None), (1, {"acc": 0.7}, None, None)]


def test_sample_single_experiment_answer_is_the_result_itself():
    score = score_sample(experiments=[(4, {"IoU": 0.09}, None, None)], answer='{"IoU": 0.0901}')
    assert score.passed
    assert score.experiments[0].answer_key is None
    assert score.parse_method == "json"


def test_sample_single_experiment_answer_may_be_keyed():
    score = score_sample(experiments=[(4, {"IoU": 0.09}, None, None)], answer={"Experiment 1": {"IoU": 0.09}})
    assert score.passed
    assert score.experiments[0].answer_key == "Experiment 1"


@pytest.mark.parametrize(
    "answer",
    [
        {"Experiment 1": {"acc": 0.5}, "Experiment 2": {"acc": 0.7}},  # upstream's labels
        {"experiment_1": {"acc": 0.5}, "experiment_2": {"acc": 0.7}},
        {"EXP-1": {"acc": 0.5}, "exp 2": {"acc": 0.7}},
        {"0": {"acc": 0.5}, "1": {"acc": 0.7}},  # experiment ids as strings
        {0: {"acc": 0.5}, 1: {"acc": 0.7}},  # experiment ids as ints
        {"1": {"acc": 0.5}, "2": {"acc": 0.7}},  # "2" is no id here, so 1-based positions
    ],
)
def test_sample_multi_experiment_keying(answer):
    score = score_sample(experiments=TWO, answer=answer)
    assert score.passed, score.to_dict()


def test_sample_bare_numbers_prefer_ids_on_a_tie():
    experiments = [(1, {"acc": 0.5}, None, None), (2, {"acc": 0.7}, None, None)]
    score = score_sample(experiments=experiments, answer={"1": {"acc": 0.5}, "2": {"acc": 0.7}})
    assert score.passed
    # Only "2" given: as an id it is the second experiment, as a position also; ids win the tie.
    score = score_sample(experiments=experiments, answer={"2": {"acc": 0.7}})
    assert [e.passed for e in score.experiments] == [False, True]


def test_sample_labelled_keys_are_positions_like_upstream():
    experiments = [(5, {"acc": 0.5}, None, None), (9, {"acc": 0.7}, None, None)]
    score = score_sample(experiments=experiments, answer={"Experiment 1": {"acc": 0.5}, "Experiment 2": {"acc": 0.7}})
    assert score.passed
    assert [e.answer_key for e in score.experiments] == ["Experiment 1", "Experiment 2"]


def test_sample_verbatim_string_ids():
    experiments = [("2303.11932#0", {"acc": 0.5}, None, None), ("2303.11932#1", {"acc": 0.7}, None, None)]
    score = score_sample(experiments=experiments, answer={"2303.11932#1": {"acc": 0.7}, "2303.11932#0": {"acc": 0.5}})
    assert score.passed


def test_sample_result_given_as_json_string():
    score = score_sample(experiments=TWO, answer={"Experiment 1": '{"acc": 0.5}', "Experiment 2": {"acc": 0.7}})
    assert score.passed


def test_sample_fails_when_one_experiment_fails_or_is_missing():
    score = score_sample(experiments=TWO, answer={"Experiment 1": {"acc": 0.5}, "Experiment 2": {"acc": 0.9}})
    assert not score.passed
    assert [e.passed for e in score.experiments] == [True, False]
    score = score_sample(experiments=TWO, answer={"Experiment 1": {"acc": 0.5}})
    assert not score.passed
    assert "no entry for experiment 1" in score.experiments[1].error


def test_sample_multi_experiment_flat_answer_is_not_guessed():
    score = score_sample(experiments=TWO, answer={"acc": 0.5})
    assert not score.passed
    assert all("no entry" in e.error for e in score.experiments)


def test_sample_unparseable_answer_fails_every_experiment_with_the_error():
    score = score_sample(experiments=TWO, answer="The script crashed with CUDA out of memory.")
    assert not score.passed
    assert "no JSON object found" in score.error
    assert len(score.experiments) == 2
    for experiment in score.experiments:
        assert not experiment.passed
        assert "no JSON object found" in experiment.error
        assert [n.reason for n in experiment.numbers] == ["missing"]


def test_sample_per_experiment_tolerances():
    experiments = [(0, {"acc": 0.5}, 0.2, None), (1, {"acc": 0.0}, None, 0.01)]
    answer = {"Experiment 1": {"acc": 0.59}, "Experiment 2": {"acc": 0.005}}
    score = score_sample(experiments=experiments, answer=answer)
    assert score.passed
    assert score.experiments[0].rtol == 0.2
    assert score.experiments[1].atol == 0.01
    assert score.experiments[1].rtol == DEFAULT_RTOL


def test_sample_upstream_mode():
    experiments = [(0, {"a": 1.0, "b": 1.0, "c": 1.0}, None, None)]
    answer = {"a": 1.0, "b": 1.0, "c": 1.1}
    assert not score_sample(experiments=experiments, answer=answer).passed
    assert score_sample(experiments=experiments, answer=answer, mode="upstream").passed


def test_sample_without_experiments_does_not_pass():
    score = score_sample(experiments=[], answer={"a": 1})
    assert not score.passed
    assert score.error


def test_upstream_fixture_answer_shape():
    # The shape upstream's n=1 samples use: experiments labelled "Experiment k", one-element lists.
    gold_1 = {"IIF": [0.00022957766970338144], "IGF": [6.531420796327108e-06]}
    gold_2 = {"IIF": [0.0003], "IGF": [-2e-06]}
    answer = (
        "Thought: both runs finished.\nFinal answer:\n```python\n"
        "{'Experiment 1': {'IIF': [0.000229], 'IGF': [6.6e-06]},\n"
        " 'Experiment 2': {'IIF': [0.000301], 'IGF': [2e-06]}}\n```"
    )
    score = score_sample(experiments=[(0, gold_1, None, None), (1, gold_2, None, None)], answer=answer)
    assert score.parse_method == "python-literal-in-fence"
    assert score.experiments[0].passed
    assert not score.experiments[1].passed  # the sign of IGF is wrong
    assert number(score.experiments[1], "IGF[0]").reason == "outside tolerance"


# --- robustness -------------------------------------------------------------------------------------


def test_parse_brace_inside_a_string():
    assert parse_answer('Answer: {"note": "a } b", "acc": 1} done').value == {"note": "a } b", "acc": 1}


def test_parse_pathological_nesting_stays_fast():
    text = "Answer: " + "{'a': " * 50_000 + "}" * 50_000
    started = time.monotonic()
    parsed = parse_answer(text)
    assert time.monotonic() - started < 5
    assert parsed.value is None
    assert parsed.error


_FRAGMENTS = st.sampled_from(
    ["{", "}", "[", "]", "'", '"', "```", "```json\n", "nan", ":", ",", "a", "1", "-", "\n", " ", "\\"]
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@given(st.one_of(st.text(), st.lists(_FRAGMENTS, max_size=60).map("".join)))
def test_parse_never_raises(text):
    parsed = parse_answer(text)
    assert (parsed.value is None) != (parsed.error is None)
    assert parsed.value is None or isinstance(parsed.value, dict)


@given(st.one_of(_JSONISH, _JSONISH.map(json.dumps), _JSONISH.map(repr)))
def test_score_sample_never_raises_and_stores_strict_json(answer):
    for experiments in (TWO, [(0, {"acc": 0.5, "losses": [1.0, -2.0]}, None, None)]):
        for mode in ("strict", "upstream"):
            score = score_sample(experiments=experiments, answer=answer, mode=mode)
            json.dumps(score.to_dict(), allow_nan=False)
            assert len(score.experiments) == len(experiments)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("{'Experiment 1': {'bias': b'x'}}", "bytes value"),
        ("{'Experiment 1': {1, 2}}", "set value"),
        ("{'Experiment 1': 1j}", "complex value"),
        ("{('Experiment', 1): 0.5}", "key of type tuple"),
        ('{"a": ' + "[" * 100 + "]" * 100 + "}", "nested deeper than 64 levels"),
        ({"Experiment 1": {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}, "nested deeper"),
        ({"Experiment 1": 10**5000}, "thousands of digits"),
    ],
)
def test_answers_json_cannot_hold_are_unparseable_not_crashes(answer, error):
    parsed = parse_answer(answer)
    assert not parsed.ok and error in parsed.error


def test_an_answer_key_of_thousands_of_digits_is_just_an_unknown_key():
    score = score_sample(experiments=[("Experiment 1", {"x": 1.0}, None, None)], answer={"1" * 5000: 0, "Experiment 1": {"x": 1.0}})
    assert score.passed
    json.dumps(score.to_dict())


# --- tolerance ratio: how far a verdict is from passing ------------------------------------------------


def one(gold, answer, rtol=None, atol=None, mode="strict"):
    return score_sample(experiments=[("e", gold, rtol, atol)], answer=answer, mode=mode)


@pytest.mark.parametrize(
    ("gold", "answer", "rtol", "atol", "expected"),
    [
        ({"x": 1.0}, {"x": 1.03}, 0.05, 0.0, 0.6),  # 3% off with a 5% tolerance
        ({"x": -2.0}, {"x": -2.3}, 0.05, 0.0, 3.0),  # abs(gold) in the tolerance
        ({"x": 1.0, "y": 10.0}, {"x": 1.01, "y": 11.5}, 0.05, 0.0, 3.0),  # the largest number decides
        ({"x": 100.0}, {"x": 101.0}, 0.0, 2.0, 0.5),  # an absolute tolerance alone
        ({"x": 0.0}, {"x": 0.0}, 0.0, 0.0, 0.0),  # no tolerance, equal: 0
        ({"x": 0.0}, {"x": 1e-12}, 0.0, 0.0, math.inf),  # no tolerance, different: inf
        ({"x": 0.0}, {"x": 5e-9}, None, None, 0.5),  # gold 0: the default atol alone
        ({"losses": [1.0, 2.0]}, {"losses": [1.0, 2.2]}, None, None, 2.0),  # flattened lists
    ],
)
def test_tolerance_ratio_values(gold, answer, rtol, atol, expected):
    score = one(gold, answer, rtol, atol)
    assert tolerance_ratio(score) == pytest.approx(expected)
    assert tolerance_ratio(score.to_dict()) == tolerance_ratio(score)  # the stored dict reads the same


def test_tolerance_ratio_takes_the_largest_over_experiments_with_their_own_tolerances():
    experiments = [(1, {"a": 1.0}, 0.01, 0.0), (2, {"b": 1.0}, 0.10, 0.0)]
    score = score_sample(experiments=experiments, answer={"1": {"a": 1.005}, "2": {"b": 1.15}})
    assert not score.passed
    assert tolerance_ratio(score) == pytest.approx(1.5)  # 15% against 10%; 0.5% against 1% is 0.5


@pytest.mark.parametrize(
    "answer",
    [
        {"x": None},  # missing number
        {"y": 1.0},  # missing key
        {"x": "nan"},
        {"x": float("inf")},
        {"x": "93%"},  # not a number
        {"x": [1.0]},  # a list where gold has a number
        "no object here",  # unparseable
    ],
)
def test_tolerance_ratio_is_none_when_no_tolerance_would_pass(answer):
    score = one({"x": 1.0, "z": 2.0}, answer if isinstance(answer, str) else {"z": 2.0, **answer})
    assert not score.passed
    assert tolerance_ratio(score) is None
    assert tolerance_ratio(score.to_dict()) is None


def test_tolerance_ratio_is_none_for_missing_experiments_upstream_mode_and_no_score():
    two = score_sample(experiments=[(1, {"a": 1.0}, None, None), (2, {"b": 1.0}, None, None)], answer={"1": {"a": 1.0}})
    assert two.experiments[0].passed and tolerance_ratio(two) is None  # experiment 2 has no result
    assert tolerance_ratio(one({"x": 1.0}, {"x": 1.0}, mode="upstream")) is None
    assert tolerance_ratio(score_sample(experiments=[], answer={})) is None
    assert tolerance_ratio(None) is None


def test_tolerance_ratio_stays_on_the_side_of_one_the_rule_chose():
    # At the boundary: 1.05 - 1 is 0.050000000000000044 in floats, which fails the rule.
    score = one({"x": 1.0}, {"x": 1.05}, 0.05, 0.0)
    assert not score.passed and tolerance_ratio(score) > 1
    # The difference and the tolerance both overflow: the rule says inf <= inf passes, the quotient is nan.
    huge = one({"x": -1e308}, {"x": 1e308}, 2.0, 0.0)
    assert huge.passed and tolerance_ratio(huge) == 1.0


_GOLD_VALUES = st.one_of(st.just(0.0), st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False))
_REPORTED = st.one_of(
    st.floats(min_value=-0.5, max_value=0.5).map(lambda error: ("relative", error)),  # near gold
    st.floats(min_value=-1e-7, max_value=1e-7).map(lambda error: ("absolute", error)),  # round-off
    st.just(("exact", 0.0)),
    st.sampled_from([("value", math.nan), ("value", math.inf), ("value", "n/a"), ("value", None), ("missing", None)]),
    st.floats(allow_nan=False).map(lambda value: ("value", value)),
)


@st.composite
def _scored_samples(draw):
    experiments, answer = [], {}
    for number in range(1, draw(st.integers(1, 3)) + 1):
        keys = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
        gold = {key: draw(_GOLD_VALUES) for key in keys}
        rtol = draw(st.sampled_from([None, 0.0, 0.01, 0.05, 0.2]))
        atol = draw(st.sampled_from([None, 0.0, 1e-8, 1e-3]))
        experiments.append((number, gold, rtol, atol))
        reported = {}
        for key, gold_value in gold.items():
            kind, value = draw(_REPORTED)
            if kind == "relative":
                reported[key] = gold_value * (1 + value)
            elif kind == "absolute":
                reported[key] = gold_value + value
            elif kind == "exact":
                reported[key] = gold_value
            elif kind == "value":
                reported[key] = value
        if draw(st.booleans()) or len(experiments) == 1:
            answer[str(number)] = reported
    return experiments, answer


@given(_scored_samples())
def test_tolerance_ratio_is_at_most_one_exactly_when_the_strict_score_passes(sample):
    experiments, answer = sample
    score = score_sample(experiments=experiments, answer=answer)
    ratio = tolerance_ratio(score)
    assert (ratio is not None and ratio <= 1) == score.passed
    assert tolerance_ratio(json.loads(json.dumps(score.to_dict()))) == ratio  # as stored and read back
    assert ratio is None or ratio >= 0


def test_scaling_every_tolerance_by_f_passes_exactly_when_the_ratio_is_at_most_f():
    gold = {"a": 10.0, "b": -0.5}
    answer = {"a": 10.3, "b": -0.51}  # 3% and 2% off: ratio 0.6 at 5%
    ratio = tolerance_ratio(one(gold, answer, 0.05, 0.0))
    assert ratio == pytest.approx(0.6)
    for tolerance in (0.005, 0.01, 0.02, 0.029, 0.031, 0.05, 0.1):
        passed = one(gold, answer, tolerance, 0.0).passed
        assert passed == (ratio <= tolerance / 0.05 + 1e-12), tolerance


def _scores(*errors):
    """Stored score dicts of one number `1 + error` against gold 1 at the rule's tolerance."""
    return [one({"x": 1.0}, {"x": 1.0 + error}).to_dict() for error in errors]


def test_attempt_ratio_follows_the_leaderboard_verdict():
    near, off, far = _scores(0.01, 0.07, 0.15)  # ratios 0.2, 1.4, 3.0
    missing = one({"x": 1.0}, {}).to_dict()
    ratio = functools.partial(attempt_tolerance_ratio, done=True)
    # Not re-executed: the reported score's ratio.
    assert ratio(reported_score=near, reported_passed=True, reexecution_score=None, reexecution_passed=None,
                 passed=False) == pytest.approx(0.2)
    assert ratio(reported_score=off, reported_passed=False, reexecution_score=None, reexecution_passed=None,
                 passed=False) == pytest.approx(1.4)
    # Re-executed: the larger of the two, None if either is None.
    assert ratio(reported_score=near, reported_passed=True, reexecution_score=far, reexecution_passed=False,
                 passed=False) == pytest.approx(3.0)
    assert ratio(reported_score=off, reported_passed=False, reexecution_score=near, reexecution_passed=True,
                 passed=False) == pytest.approx(1.4)
    assert ratio(reported_score=near, reported_passed=True, reexecution_score=near, reexecution_passed=True,
                 passed=True) == pytest.approx(0.2)
    assert ratio(reported_score=near, reported_passed=True, reexecution_score=missing, reexecution_passed=False,
                 passed=False) is None
    # A failed verdict whose numbers pass failed for another reason: no tolerance would make it pass.
    assert ratio(reported_score=near, reported_passed=True, reexecution_score=near, reexecution_passed=True,
                 passed=False) is None
    assert attempt_tolerance_ratio(done=False, reported_score=near, reported_passed=True, reexecution_score=None,
                                   reexecution_passed=None, passed=False) is None
