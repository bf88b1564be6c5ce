"""Common nouns of early child vocabulary, in the style of the MacArthur-Bates CDI.

Written for this project after the categories of the CDI Words & Sentences
form (not copied from it): concrete, picturable things a toddler meets in
play, meals and care routines. Lower-case; compounds are one word joined by
`_` (teddy_bear), as CHAT writes them. The synthetic CHILDES generator draws
its object inventory from here.
"""
from __future__ import annotations

_ANIMALS = (
    "bear", "bee", "bird", "bunny", "butterfly", "cat", "chicken", "cow", "deer", "dog",
    "donkey", "duck", "elephant", "fish", "frog", "giraffe", "goose", "hen", "horse", "kitty",
    "lamb", "lion", "monkey", "moose", "mouse", "owl", "penguin", "pig", "puppy", "sheep",
    "squirrel", "tiger", "turkey", "turtle", "zebra",
)
_VEHICLES = (
    "airplane", "bicycle", "boat", "bus", "car", "fire_truck", "helicopter", "motorcycle",
    "stroller", "tractor", "train", "truck",
)
_TOYS = (
    "ball", "balloon", "bat", "block", "book", "bubbles", "crayon", "doll", "drum", "game",
    "glue", "kite", "pen", "pencil", "play_dough", "puzzle", "story", "teddy_bear", "toy",
)
_FOOD = (
    "apple", "applesauce", "banana", "bread", "butter", "cake", "candy", "carrot", "cereal",
    "cheese", "chicken_soup", "coffee", "cookie", "cracker", "donut", "egg", "french_fries",
    "grapes", "gum", "hamburger", "ice_cream", "jello", "juice", "meat", "milk", "muffin",
    "orange", "pancake", "peanut_butter", "peas", "pizza", "popcorn", "potato", "pretzel",
    "pudding", "raisin", "sandwich", "soup", "spaghetti", "strawberry", "toast", "water",
    "yogurt",
)
_CLOTHING = (
    "belt", "bib", "boots", "button", "coat", "diaper", "dress", "gloves", "hat", "jacket",
    "jeans", "mittens", "necklace", "pajamas", "pants", "scarf", "shirt", "shoe", "shorts",
    "slipper", "sneaker", "sock", "sweater", "zipper",
)
_BODY = (
    "ankle", "arm", "belly_button", "cheek", "chin", "ear", "eye", "face", "finger", "foot",
    "hair", "hand", "head", "knee", "leg", "lips", "mouth", "nose", "shoulder", "toe",
    "tongue", "tooth", "tummy",
)
_HOUSEHOLD = (
    "basket", "blanket", "bottle", "bowl", "box", "broom", "brush", "bucket", "camera", "clock",
    "comb", "cup", "dish", "fork", "glass", "hammer", "keys", "knife", "lamp", "light", "money",
    "napkin", "paper", "penny", "picture", "pillow", "plant", "plate", "purse", "radio",
    "scissors", "soap", "spoon", "telephone", "tissue", "toothbrush", "towel", "trash", "tray",
    "vacuum", "watch",
)
_FURNITURE = (
    "basement", "bathroom", "bathtub", "bed", "bedroom", "bench", "chair", "closet", "couch",
    "crib", "door", "drawer", "dryer", "garage", "high_chair", "kitchen", "oven", "porch",
    "potty", "refrigerator", "rocking_chair", "room", "shower", "sink", "sofa", "stairs",
    "stove", "table", "television", "window",
)
_OUTSIDE = (
    "backyard", "cloud", "flag", "flower", "garden", "grass", "hose", "ladder", "moon", "pool",
    "rain", "rock", "roof", "sandbox", "shovel", "sidewalk", "sky", "slide", "snow",
    "snowman", "sprinkler", "star", "stick", "stone", "street", "sun", "swing", "tree", "wind",
)

CDI_NOUNS: tuple[str, ...] = (
    _ANIMALS + _VEHICLES + _TOYS + _FOOD + _CLOTHING + _BODY + _HOUSEHOLD + _FURNITURE + _OUTSIDE
)
