"""The lab's foundations: labels, preprocessing, the model build, sample photos, CPU/GPU facts,
process handling and utilisation sampling. Imports nothing else of servelab."""
