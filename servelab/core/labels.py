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


def label_for(index: int) -> str:
    """Name of class ``index``; raises a clear error for an out-of-range index."""
    if not 0 <= index < NUM_CLASSES:
        raise IndexError(f"class index {index} outside 0..{NUM_CLASSES - 1}")
    return CLASSES[index]
