"""Writes the demo's bundled data: a small encyclopedia-like corpus and a review set.

The text is generated from hand-written templates and word lists (no outside data), with a
fixed seed, so the files in demo/data are reproducible:

    python demo/make_demo_data.py --output_dir demo/data

- `corpus.txt`: one sentence per line, a blank line between documents (the input format of
  create_pretraining_data). Each document describes one invented town, river or animal in
  sentences whose order matters, so next-sentence prediction has something to learn.
- `reviews/{train,dev}.tsv`: `sentence<TAB>label` rows (label `positive` or `negative`) of
  short restaurant, hotel and film reviews, for the classifier.
"""

import argparse
import os
import random

SYLLABLES = ["ka", "lo", "ri", "ven", "mar", "tu", "sel", "bra", "do", "nix", "qua", "fen",
             "gal", "or", "pim", "sta", "ul", "zer", "wen", "hol", "ber", "ith", "mon", "cas"]
REGIONS = ["the northern hills", "the eastern plain", "the southern coast", "the western valley",
           "the central highlands", "the lake district", "the river delta", "the old forest"]
PRODUCTS = ["wool", "cheese", "glass", "timber", "salt", "honey", "copper", "paper", "wine",
            "pottery", "linen", "apples", "fish", "stone", "clocks", "boats"]
BUILDINGS = ["stone bridge", "clock tower", "covered market", "small harbour", "old library",
             "round church", "windmill", "railway station", "public garden", "lighthouse"]
FESTIVALS = ["spring", "harvest", "lantern", "music", "river", "winter", "flower", "bread"]
ANIMAL_KINDS = ["bird", "beetle", "frog", "fish", "lizard", "moth", "bat", "snail"]
COLOURS = ["brown", "grey", "green", "yellow", "black", "red", "blue", "white", "orange"]
HABITATS = ["wet meadows", "pine forests", "rocky shores", "slow rivers", "dry grassland",
            "mountain streams", "reed beds", "old orchards"]
FOODS = ["seeds", "small insects", "leaves", "berries", "worms", "algae", "fallen fruit",
         "snails"]
SEASONS = ["spring", "summer", "autumn", "winter"]


def make_name(rng, parts=2):
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def town_document(rng):
    name, river = make_name(rng), make_name(rng, 3)
    product, other_product = rng.sample(PRODUCTS, 2)
    building = rng.choice(BUILDINGS)
    population = rng.randrange(800, 90000, 10)
    founded = rng.randrange(900, 1900)
    festival, season = rng.choice(FESTIVALS), rng.choice(SEASONS)
    sentences = [
        f"{name} is a town in {rng.choice(REGIONS)} on the banks of the river {river}.",
        f"It was founded in the year {founded} by {rng.choice(['farmers', 'traders', 'monks', 'fishermen', 'miners'])}.",
        f"In {founded + rng.randrange(20, 300)} the town received a charter and built its {building}.",
        f"Today {name} has a population of about {population:,} people.",
        f"The local economy depends on {product}, and in recent years also on {other_product}.",
        f"Most of the {product} is sold at the weekly market and shipped down the {river}.",
        f"Every {season} the town holds a {festival} festival that draws visitors from far away.",
        f"During the festival the streets around the {building} are closed to traffic.",
        f"{name} is linked to the rest of the region by {rng.choice(['a railway line', 'a main road', 'a ferry', 'two bridges'])}.",
    ]
    if rng.random() < 0.5:
        twin = make_name(rng)
        sentences.append(f"Since {founded + rng.randrange(400, 1100)} {name} has been twinned with the town of {twin}.")
        sentences.append(f"Each year a group of pupils from {twin} spends a week in {name}.")
    return sentences


def river_document(rng):
    name, source_town, mouth_town = make_name(rng, 3), make_name(rng), make_name(rng)
    length = rng.randrange(40, 900)
    fish = rng.choice(["trout", "salmon", "pike", "carp", "eel"])
    return [
        f"The {name} is a river that flows through {rng.choice(REGIONS)}.",
        f"It rises in the hills above {source_town} and is about {length} kilometres long.",
        f"After leaving {source_town} the river turns {rng.choice(['north', 'south', 'east', 'west'])} and widens.",
        f"Several mills were built along its course to grind grain and saw {rng.choice(PRODUCTS)}.",
        f"The lower {name} is deep enough for small boats as far as {mouth_town}.",
        f"At {mouth_town} the river reaches the sea through a wide {rng.choice(['estuary', 'delta', 'bay'])}.",
        f"The water is clean and the river is known for its {fish}.",
        f"Anglers come in {rng.choice(SEASONS)} when the {fish} are most plentiful.",
    ]


def animal_document(rng):
    name = make_name(rng, 2).lower()
    kind, colour, colour2 = rng.choice(ANIMAL_KINDS), *rng.sample(COLOURS, 2)
    habitat, food = rng.choice(HABITATS), rng.choice(FOODS)
    size = rng.randrange(2, 60)
    season = rng.choice(SEASONS)
    return [
        f"The {colour} {name} is a small {kind} found in {habitat}.",
        f"Adults are about {size} centimetres long, with {colour2} marks on the back.",
        f"The {name} feeds mainly on {food}, which it finds {rng.choice(['at dawn', 'at night', 'in the afternoon', 'after rain'])}.",
        f"It is most active in {season} and rests during the coldest weeks of the year.",
        f"The female lays {rng.randrange(2, 40)} eggs in a hidden place near the {rng.choice(['water', 'ground', 'roots', 'rocks'])}.",
        f"The young leave the nest after about {rng.randrange(2, 9)} weeks.",
        f"Because {habitat} are being drained or cleared, the {name} has become rare in many places.",
        f"Several reserves have been set up to protect it.",
    ]


POSITIVE = {
    "restaurant": ["the soup was rich and full of flavour", "the staff were warm and attentive",
                   "every dish arrived hot and beautifully served", "the bread was fresh and the wine was excellent",
                   "we were seated quickly and the service was friendly", "the dessert was the best we have had in years"],
    "hotel": ["the room was clean, quiet and spacious", "the bed was very comfortable",
              "the view from the balcony was wonderful", "breakfast was generous and delicious",
              "the receptionist was helpful and kind", "everything worked and the place felt calm"],
    "film": ["the acting was superb from start to finish", "the story was moving and clever",
             "the music fitted every scene perfectly", "i laughed and cried and loved every minute",
             "the photography was stunning", "the ending was brilliant and surprising"],
}
NEGATIVE = {
    "restaurant": ["the soup was cold and tasteless", "the staff were rude and slow",
                   "we waited an hour for a dry and burnt meal", "the bread was stale and the wine was sour",
                   "the tables were dirty and the room was noisy", "the dessert was bland and overpriced"],
    "hotel": ["the room was dirty and smelled of smoke", "the bed was hard and uncomfortable",
              "the window looked onto a noisy car park", "breakfast was poor and the coffee was awful",
              "the receptionist was unfriendly and unhelpful", "the shower was broken and nobody fixed it"],
    "film": ["the acting was wooden and dull", "the story was confusing and boring",
             "the music was loud and annoying", "i nearly fell asleep halfway through",
             "the photography was dark and ugly", "the ending was silly and predictable"],
}
OPENERS = ["honestly,", "to be fair,", "overall,", "sadly,", "as expected,", "in short,", ""]
CLOSERS = ["We would {verb} it to friends.", "I would {verb} it.", "{verb2}.", ""]


def review(rng, label):
    topic = rng.choice(sorted(POSITIVE))
    pool = POSITIVE[topic] if label == "positive" else NEGATIVE[topic]
    first, second = rng.sample(pool, 2)
    opener = rng.choice(OPENERS)
    closer = rng.choice(CLOSERS).format(
        verb="recommend" if label == "positive" else "not recommend",
        verb2="Five stars" if label == "positive" else "One star at most")
    text = f"{opener} {first} and {second}. {closer}".strip()
    return text[0].upper() + text[1:]


def write_corpus(path, rng, num_documents):
    makers = [town_document, river_document, animal_document]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for i in range(num_documents):
            if i:
                f.write("\n")
            f.write("\n".join(makers[i % 3](rng)) + "\n")
    os.replace(path + ".tmp", path)


def write_reviews(path, rng, num_rows):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for i in range(num_rows):
            label = "positive" if i % 2 == 0 else "negative"
            f.write(f"{review(rng, label)}\t{label}\n")
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", default=os.path.join(os.path.dirname(__file__), "data"))
    parser.add_argument("--num_documents", type=int, default=800)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    rng = random.Random(args.seed)
    write_corpus(os.path.join(args.output_dir, "corpus.txt"), rng, args.num_documents)
    os.makedirs(os.path.join(args.output_dir, "reviews"), exist_ok=True)
    write_reviews(os.path.join(args.output_dir, "reviews", "train.tsv"), rng, 1600)
    write_reviews(os.path.join(args.output_dir, "reviews", "dev.tsv"), rng, 400)


if __name__ == "__main__":
    main()
