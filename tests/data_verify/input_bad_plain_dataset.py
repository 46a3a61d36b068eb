"""TFP201: strategy.run fed with batches of a plain dataset."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    w = tf.Variable(1.0)
ds = tf.data.Dataset.range(256).map(lambda i: tf.cast(tf.fill([4], i), tf.float32)).batch(16)


@tf.function
def step(batch):
    def replica_fn(b):
        return tf.reduce_sum(b * w)

    return strategy.run(replica_fn, args=(batch,))  # expect: TFP201


for batch in ds:
    step(batch)
