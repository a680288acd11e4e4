"""The lab itself: notebook parameters, the headless runner, and the steps the notebooks call."""
