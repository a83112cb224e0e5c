"""The tiny embedding model's world: made-up countries, eight facts each, asked about in other
words.

Every country (a pseudo-word built from syllables) has one passage per topic ("Vorlan exports
copper to its neighbours.") and questions about it that share only the country's name with
their passage ("What does Vorlan sell abroad?"). A country's eight passages all name it, so a
model that matched words alone would rank them alike: to put a question's own passage first
it must learn which question words go with which passage words, and tell one country from
another by its name's sub-words. Countries held out of training (`held_out`) test that.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SYLLABLES = [
    "vor",
    "lan",
    "kes",
    "ti",
    "mar",
    "bel",
    "do",
    "ra",
    "shu",
    "ne",
    "qua",
    "zim",
    "fen",
    "lo",
    "gar",
    "thu",
    "pel",
    "osk",
    "ari",
    "um",
    "ben",
    "cor",
    "dav",
    "el",
    "fir",
    "gul",
    "hal",
    "ist",
    "jor",
    "kam",
    "lir",
    "mun",
    "nor",
    "ost",
    "pra",
    "ril",
    "sev",
    "tam",
    "ulv",
    "vex",
    "wyn",
    "yar",
]

CITIES = "belmont harrow ostrava kelby tamsin orla dunmore velika"
METALS = "copper iron silver tin gold zinc nickel lead"
WEATHER = "snowy rainy windy foggy stormy mild icy dry"
LANGUAGES = "velic ormish tarnese kaldic siru bremic undal pashti"
YEARS = "1204 1388 1512 1640 1777 1821 1903 1956"
ANIMALS = "heron lynx otter badger falcon stag wolf crane"
RIVERS = "ambel serra kolva tisne drava umber lenna foss"
FOODS = "barley lentil onion cabbage fish bean mushroom pepper"


@dataclass(frozen=True)
class Topic:
    """One kind of fact: how a passage states it and how a question asks for it."""

    name: str
    values: tuple[str, ...]
    passages: tuple[str, ...]  # {e}: the country, {v}: the value
    questions: tuple[str, ...]  # {e} only: a question never names the value


def _topic(name: str, values: str, passages: list[str], questions: list[str]) -> Topic:
    return Topic(name, tuple(values.split()), tuple(passages), tuple(questions))


TOPICS: tuple[Topic, ...] = (
    _topic(
        "capital",
        CITIES,
        ["The capital of {e} is {v}.", "{v} is the seat of government of {e}."],
        ["Which city governs {e}?", "Where does the government of {e} sit?"],
    ),
    _topic(
        "export",
        METALS,
        ["{e} exports {v} to its neighbours.", "Most of the {v} mined in {e} is shipped away."],
        ["What does {e} sell abroad?", "Which goods leave {e} for trade?"],
    ),
    _topic(
        "climate",
        WEATHER,
        ["Winters in {e} are long and {v}.", "{e} has a {v} climate most of the year."],
        ["What is the weather like in {e}?", "How cold does it get in {e}?"],
    ),
    _topic(
        "language",
        LANGUAGES,
        ["People in {e} speak {v}.", "The official language of {e} is {v}."],
        ["Which tongue is spoken in {e}?", "What do the people of {e} talk in?"],
    ),
    _topic(
        "founding",
        YEARS,
        ["{e} was founded in the year {v}.", "The first settlers reached {e} in {v}."],
        ["When did {e} begin?", "How old is {e}?"],
    ),
    _topic(
        "animal",
        ANIMALS,
        ["The national animal of {e} is the {v}.", "The {v} appears on the flag of {e}."],
        ["Which creature stands for {e}?", "What beast is the symbol of {e}?"],
    ),
    _topic(
        "river",
        RIVERS,
        ["The river {v} flows through {e}.", "{e} lies along the banks of the {v}."],
        ["What water runs across {e}?", "Which stream crosses {e}?"],
    ),
    _topic(
        "food",
        FOODS,
        ["A popular dish in {e} is {v} soup.", "Cooks in {e} make stew from {v}."],
        ["What do people eat in {e}?", "Which meal is loved in {e}?"],
    ),
)


@dataclass(frozen=True)
class Pair:
    """A question and the passage that answers it."""

    country: str
    topic: str
    question: str
    passage: str


def country_names(count: int, seed: int) -> list[str]:
    """`count` distinct pseudo-word names of two or three syllables, capitalised."""
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        n = rng.choice((2, 2, 3))
        names.add("".join(rng.choice(SYLLABLES) for _ in range(n)).capitalize())
    return sorted(names)


def pairs_of(country: str, rng: random.Random) -> list[Pair]:
    """One (question, passage) pair per topic for `country`, templates and values drawn."""
    out = []
    for topic in TOPICS:
        value = rng.choice(topic.values)
        passage = rng.choice(topic.passages).format(e=country, v=value)
        question = rng.choice(topic.questions).format(e=country)
        out.append(Pair(country, topic.name, question, passage))
    return out


def split_countries(seed: int = 0) -> tuple[list[str], list[str]]:
    """Training countries and held-out ones (never seen in training)."""
    names = country_names(560, seed)
    rng = random.Random(seed + 1)
    rng.shuffle(names)
    return names[60:], names[:60]


def held_out(count: int = 6, seed: int = 0) -> list[Pair]:
    """The evaluation pairs: `count` held-out countries, every topic of each."""
    _, test = split_countries(seed)
    rng = random.Random(seed + 2)
    return [p for country in test[:count] for p in pairs_of(country, rng)]
