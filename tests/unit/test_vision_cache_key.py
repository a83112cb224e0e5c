"""A vision prompt's prompt-cache key covers its images: the same tokens with another image part
ways at that image, the same image keeps the key."""

from __future__ import annotations

from mlx_responses.service.engine.vision.cache_key import image_id, keyed_tokens

PAD = 9


def test_each_image_run_stands_for_its_image() -> None:
    tokens = [1, 2, PAD, PAD, PAD, 3, PAD, PAD, 4]
    keyed = keyed_tokens(tokens, PAD, ["a:auto", "b:auto"])
    a, b = image_id("a:auto"), image_id("b:auto")
    assert keyed == [1, 2, a, a, a, 3, b, b, 4]
    assert a != b and a < 0 and b < 0 and min(a, b) >= -(1 << 31)


def test_another_image_parts_ways_where_it_starts() -> None:
    tokens = [1, 2, PAD, PAD, 3]
    one = keyed_tokens(tokens, PAD, ["a:auto"])
    other = keyed_tokens(tokens, PAD, ["b:auto"])
    detail = keyed_tokens(tokens, PAD, ["a:low"])
    assert one is not None and other is not None and detail is not None
    assert one[:2] == other[:2] and one[2] != other[2] and one[2] != detail[2]
    # The next turn (the reply and a new message appended) extends the key.
    assert keyed_tokens([*tokens, 7, 8], PAD, ["a:auto"]) == [*one, 7, 8]


def test_runs_that_are_not_one_per_image_stand_for_all_the_images() -> None:
    both = image_id("a:auto\x1fb:auto")
    assert keyed_tokens([1, PAD, 2], PAD, ["a:auto", "b:auto"]) == [1, both, 2]
    one = keyed_tokens([1, PAD, 2, PAD], PAD, ["a:auto"])
    assert one == [1, image_id("a:auto"), 2, image_id("a:auto")]
    assert keyed_tokens([1, 2, 3], PAD, []) == [1, 2, 3]


def test_an_image_in_rows_is_one_run_across_its_joiners() -> None:
    """Pixtral's image: rows of placeholders joined by `[IMG_BREAK]` (BREAK), then `[IMG_END]`
    (END); each image's rows stand for it, the joiners stay."""
    BREAK, END = 20, 21
    tokens = [1, PAD, PAD, BREAK, PAD, PAD, END, 2, PAD, BREAK, PAD, END, 3]
    a, b = image_id("a:auto"), image_id("b:auto")
    keyed = keyed_tokens(tokens, PAD, ["a:auto", "b:auto"], (BREAK,))
    assert keyed == [1, a, a, BREAK, a, a, END, 2, b, BREAK, b, END, 3]
    # The first turn's key is a prefix of the next one's, which adds an image.
    assert keyed_tokens(tokens[:8], PAD, ["a:auto"], (BREAK,)) == keyed[:8]
    # Without the joiner, each row is a run: every placeholder stands for both images.
    both = image_id("a:auto\x1fb:auto")
    assert keyed_tokens(tokens, PAD, ["a:auto", "b:auto"]) == [
        both if t == PAD else t for t in tokens
    ]
