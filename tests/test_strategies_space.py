"""bot.strategies.space.interpolation: the parabola through a knob's measured values."""

from bot.strategies import space
from bot.strategies.protocol import KnobSpec


def interpolate(spec: KnobSpec, current: object, levels: dict, skip: set[str]) -> object:
    """The value the parabola picks, or None."""
    found = space.interpolation(spec, current, levels, skip)
    return None if found is None else found[0]


POW2 = KnobSpec("BLOCK", "block_size", "knob", (32, 64, 128, 256, 512, 1024, 2048))


def test_vertex_inside_the_bracket_on_the_ladder():
    # 32 (+14 %), 512 (0), 2048 (+13.5 %): on the ladder 0, 4, 6 the vertex is at 3 -> 256
    assert interpolate(POW2, 512, {512: 0.0, 32: 0.132, 2048: 0.127}, set()) == 256


def test_a_knob_at_its_edge_uses_the_two_nearest_values_on_its_only_side():
    spec = KnobSpec("A", "block_size", "knob", (1, 2, 4, 8, 16))
    # 16 is the edge; 1 lost 17 %, 4 tied: the minimum lies between 4 and 16 -> 8
    assert interpolate(spec, 16, {16: 0.0, 1: 0.169, 4: 0.004}, set()) == 8


def test_an_end_within_noise_faster_still_brackets():
    spec = KnobSpec("A", "block_size", "knob", (1, 2, 3, 4))
    assert interpolate(spec, 2, {2: 0.0, 1: 0.28, 4: -0.014}, set()) == 3


def test_no_guess_without_a_minimum_or_a_bracket():
    # opening downwards (both ends faster): no minimum inside
    assert interpolate(POW2, 512, {512: 0.0, 32: -0.1, 2048: -0.1}, set()) is None
    # one side only, not at an edge: the other side's own probe comes first
    assert interpolate(POW2, 512, {512: 0.0, 32: 0.2, 128: 0.1}, set()) is None
    # every value inside the bracket measured or excluded
    levels = {512: 0.0, 256: 0.05, 1024: 0.05}
    assert interpolate(POW2, 512, levels, set()) is None
    assert interpolate(POW2, 512, {512: 0.0, 128: 0.1, 1024: 0.1}, {"256"}) is None


def test_a_tie_goes_to_the_side_whose_end_measured_faster():
    spec = KnobSpec("A", "block_size", "knob", (16, 32, 64, 128, 256))
    # symmetric ends put the vertex on the current value: 32 and 128 are as near
    assert interpolate(spec, 64, {64: 0.0, 16: 0.05, 256: 0.05}, set()) in (32, 128)
    # the far end up measured faster: the vertex moves up
    assert interpolate(spec, 64, {64: 0.0, 16: 0.10, 256: 0.03}, set()) == 128
    assert interpolate(spec, 64, {64: 0.0, 16: 0.03, 256: 0.10}, set()) == 32


def test_the_parabolas_level_at_its_pick_is_its_prediction_relative_to_here():
    spec = KnobSpec("A", "block_size", "knob", (1, 2, 3, 4))
    # 1 lost 28 %, 4 tied (-1.4 %): the parabola through (0, .28), (1, 0), (3, -.014) is
    # y = .091 x^2 - .371 x + .28, which puts 3 (x = 2) 9.8 % lower (log) than here
    value, level = space.interpolation(spec, 2, {2: 0.0, 1: 0.28, 4: -0.014}, set())
    assert value == 3
    assert abs(level - (0.091 * 4 - 0.371 * 2 + 0.28)) < 1e-9, level
    # both ends about equally slower: the bowl's bottom is here, nothing faster is predicted
    _, flat = space.interpolation(POW2, 512, {512: 0.0, 32: 0.132, 2048: 0.127}, set())
    assert flat > -0.03, flat
