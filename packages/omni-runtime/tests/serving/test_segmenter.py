"""The stream's text segmenter: segments as soon as they are complete, never a character lost or moved."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from omni_runtime.serving.segmenter import SegmentLimits, TextSegmenter

ANSWER = ("Sure, the meeting is at three, in the small room on the second floor. Dr. Smith brings 3.5 kg of slides; "
          "the numbers for the third quarter come later, if at all.")


def feed_all(segmenter: TextSegmenter, deltas: list[str]) -> list[str]:
    out = []
    for delta in deltas:
        out += segmenter.feed(delta)
    return out + segmenter.flush()


def test_sentences_come_out_while_text_arrives_and_abbreviations_do_not_cut():
    segmenter = TextSegmenter()
    early = []
    for word in ANSWER.split(" "):
        early.append(segmenter.feed(word + " "))
    segments = [s for batch in early for s in batch] + segmenter.flush()
    assert "".join(segments) == ANSWER + " "
    assert segments[0] == "Sure, the meeting is at three, "  # the first clause, for early audio
    assert "in the small room on the second floor. " in segments
    assert not any(s.endswith("Dr. ") for s in segments)  # pysbd knows the abbreviation
    assert sum(1 for batch in early if batch) >= 3  # segments left before the text was complete


def test_long_text_without_punctuation_is_cut_at_spaces_and_bounded():
    limits = SegmentLimits(max_segment_chars=50)
    segments = feed_all(TextSegmenter(limits), ["word " * 40])
    assert all(len(s) <= 50 for s in segments) and all(s.endswith(" ") for s in segments[:-1])
    assert [len(s) for s in feed_all(TextSegmenter(limits), ["x" * 120])] == [50, 50, 20]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab .,;!?\n-3")), max_size=40), max_size=30))
def test_any_deltas_concatenate_back_to_the_input(deltas):
    assert "".join(feed_all(TextSegmenter(SegmentLimits(max_segment_chars=60, clause_chars=20)), deltas)) == "".join(deltas)
