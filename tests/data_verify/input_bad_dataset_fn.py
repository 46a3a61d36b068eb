"""TFP203: dataset_fn ignores input_context (no shard, global batch)."""
import tensorflow as tf

GLOBAL_BATCH = 16
strategy = tf.distribute.MirroredStrategy()


def dataset_fn(input_context):
    ds = tf.data.Dataset.range(512).map(lambda i: tf.cast(tf.fill([4], i), tf.float32))
    return ds.batch(GLOBAL_BATCH)


dist = strategy.distribute_datasets_from_function(dataset_fn)  # expect: TFP203


@tf.function
def step(b):
    return strategy.run(lambda x: tf.reduce_sum(x), args=(b,))


for b in dist:
    step(b)
