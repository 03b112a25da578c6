import pytest

from omni_models.common.limits import GenerationLimits, check_speed, limits_for_text
from omni_models.common.request import prepare_text_request
from omni_models.common.text import ByteTokenizer, normalize_text, number_to_words, prepare_text


def test_normalisation_spells_numbers_and_symbols_and_collapses_space():
    assert normalize_text("  I have 3 cats &\t21 dogs ,  100%  ") == "I have three cats and twenty-one dogs, one hundred percent"
    assert normalize_text("\ufb01ne\u200b\x07line") == "fine line"


@pytest.mark.parametrize("n", [0, 7, 13, 40, 99, 101, 999, 1000, 1234567, 10**12 + 5])
def test_number_words_have_no_digits(n):
    words = number_to_words(n)
    assert words and not any(ch.isdigit() for ch in words)


def test_number_words_compose():
    assert number_to_words(1234) == "one thousand two hundred thirty-four"
    assert number_to_words(2_000_005) == "two million five"


@pytest.mark.parametrize("text", ["hello", "héllo wörld", "日本語", "emoji 🎉"])
def test_byte_tokenizer_round_trips_and_frames_with_specials(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


def test_empty_and_overlong_text_are_user_errors():
    with pytest.raises(ValueError, match="empty after normalisation"):
        prepare_text(" \t\n", max_chars=10)
    with pytest.raises(ValueError, match="at most 10"):
        prepare_text("a" * 11, max_chars=10)


def test_limits_scale_with_text_length_and_speed():
    short = limits_for_text(15, frame_rate=25.0, cap=10_000)
    long = limits_for_text(150, frame_rate=25.0, cap=10_000)
    assert short.max_new_tokens < long.max_new_tokens
    assert long.min_new_tokens >= 9 * short.min_new_tokens
    fast = limits_for_text(150, frame_rate=25.0, cap=10_000, speed=2.0)
    assert fast.max_new_tokens < long.max_new_tokens
    # 150 chars at 15 chars/s = 10 s = 250 frames; bounds are 0.8x and 1.2x
    assert (long.min_new_tokens, long.max_new_tokens) == (200, 300)


def test_limits_respect_model_cap_and_request_max():
    capped = limits_for_text(10_000, frame_rate=25.0, cap=100)
    assert capped.max_new_tokens == 100 and capped.min_new_tokens <= 100
    req = limits_for_text(150, frame_rate=25.0, cap=1000, request_max=20)
    assert req.max_new_tokens == 20 and req.min_new_tokens <= 20
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        limits_for_text(10, frame_rate=25.0, cap=100, request_max=0)


def test_limits_round_trip_through_plain_dicts():
    limits = GenerationLimits(3, 9)
    assert GenerationLimits.from_dict(limits.to_dict()) == limits
    with pytest.raises(ValueError):
        GenerationLimits.from_dict({"max_new_tokens": 3})
    with pytest.raises(ValueError):
        GenerationLimits(5, 4)


@pytest.mark.parametrize("speed", [0.1, 5, "fast", True])
def test_bad_speed_is_rejected(speed):
    with pytest.raises(ValueError, match="speed"):
        check_speed(speed)


def test_request_preparation_rejects_unknown_voice_and_bad_seed():
    with pytest.raises(ValueError, match="unknown voice 'nobody'"):
        prepare_text_request({"text": "hi", "voice": "nobody"}, frame_rate=25, max_chars=100, max_seconds=10)
    with pytest.raises(ValueError, match="seed must be an integer"):
        prepare_text_request({"text": "hi", "seed": "x"}, frame_rate=25, max_chars=100, max_seconds=10)
    request = prepare_text_request({"text": "Hi 2 you", "voice": "Nova"}, frame_rate=25, max_chars=100, max_seconds=10)
    assert request.text == "Hi two you" and request.voice_index > 0


def test_text_limit_counts_tokenizer_bytes_not_characters():
    assert prepare_text("é" * 5, max_chars=10) == "é" * 5
    with pytest.raises(ValueError, match="12 UTF-8 bytes after normalisation; this model accepts at most 10"):
        prepare_text("é" * 6, max_chars=10)
