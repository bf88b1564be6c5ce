"""The embedded stories' slots, read draw by draw: who the hero is and how the text refers to them,
the article before a phrase, and how many invented names are handed out."""

import random

import pytest
from scripted import Scripted

from emergence.studies.assoc import stories as s

# With every pick's draw 0, r.choices takes each tuple's first (most likely) option.
FIRSTS = dict(
    place="park",
    place2="garden",  # the second place is another place than the first
    obj="ball",
    animal="dog",
    food="apple",
    colour="red",
    good="happy",
    bad="sad",
    parent="mom",
    fear="the dark",
    a_obj="a ball",
    a_animal="a dog",
    a_food="an apple",
    a_colour_obj="a red ball",
    a_colour_animal="a red dog",
)
GIRL = dict(kid="girl", he="she", his="her", him="her", He="She", His="Her")
BOY = dict(kid="boy", he="he", his="his", him="him", He="He", His="His")


@pytest.mark.parametrize(
    ("draws", "name", "want"),
    [
        # a first draw below 0.5: a girl, named from GIRLS; the friend is anyone else
        ([0.49] + [0.0] * 12, None, dict(Hero="Lily", Friend="Mia", **GIRL)),
        # exactly 0.5 is not below it: a boy
        ([0.5] + [0.0] * 12, None, dict(Hero="Tom", Friend="Lily", **BOY)),
        # a given name: no draw for the hero, the pronouns still follow the first draw
        ([0.6] + [0.0] * 11, "Bazo", dict(Hero="Bazo", Friend="Lily", **BOY)),
        ([0.0] * 12, "Bazo", dict(Hero="Bazo", Friend="Lily", **GIRL)),
    ],
)
def test_cast_binds_each_slot_once(draws, name, want):
    r = Scripted(draws)
    assert s._cast(r, name) == {**want, **FIRSTS}
    assert r.draws == []  # every draw used, none extra


def test_the_two_places_always_differ():
    for seed in range(200):
        slots = s._cast(random.Random(seed), None)
        assert slots["place2"] != slots["place"] and slots["place2"] in s.PLACES


@pytest.mark.parametrize(
    ("phrase", "want"),
    [
        ("apple", "an apple"),
        ("egg", "an egg"),
        ("ice cream", "an ice cream"),
        ("owl", "an owl"),
        ("umbrella", "an umbrella"),
        ("ball", "a ball"),  # a vowel second does not count
        ("big dog", "a big dog"),
        ("yellow kite", "a yellow kite"),  # y is not a vowel here
    ],
)
def test_the_article_follows_the_first_letter(phrase, want):
    assert s._a(phrase) == want


@pytest.mark.parametrize("n", [0, 1, 5, 71])
def test_exactly_n_invented_names(n):
    names = s.invented_names(n)
    assert len(names) == n and len(set(names)) == n
    assert names[:3] == ["Baba", "Babe", "Babi"][:n]


@pytest.mark.parametrize(("draw", "want"), [(0.54, "a"), (0.55, "b"), (0.81, "b"), (0.82, "c")])
def test_a_pick_weighs_options_by_one_over_rank(draw, want):
    """Weights 1, 1/2, 1/3 (total 11/6): "a" takes draws below 6/11, "b" below 9/11, "c" the rest."""
    r = Scripted([draw])
    assert s._pick(r, ("a", "b", "c")) == want
    assert r.draws == []
