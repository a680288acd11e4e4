"""The 11 Food-11 class labels: the single definition every component uses."""

from __future__ import annotations

CLASSES: tuple[str, ...] = (
    "Bread",
    "Dairy product",
    "Dessert",
    "Egg",
    "Fried food",
    "Meat",
    "Noodles/Pasta",
    "Rice",
    "Seafood",
    "Soup",
    "Vegetable/Fruit",
)

NUM_CLASSES: int = len(CLASSES)

