"""The lab's defaults for a model's config, each in one place (imports nothing: the hub's notebooks
read them through ``servelab.lab.params`` without tritonclient).

The ``dynamic_batching`` block notebooks 07 and 11 turn on unless their parameters say otherwise: the
original lab's values (its section 7); ``servelab.lab.params`` makes them both presets' values and
``servelab.lab.triton_steps.set_dynamic_batching`` its defaults.
"""

PREFERRED_BATCH_SIZES = (4, 6, 8)  # preferred_batch_size: the batches the scheduler tries to form
MAX_QUEUE_DELAY_US = 100  # max_queue_delay_microseconds: how long a request may wait for others
