# The dataset is distributed on one path only (an option switched off): on the other, the plain
# dataset's batches reach strategy.run.
import tensorflow as tf

USE_DIST = False
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    w = tf.Variable(1.0)

ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(i, tf.float32)).batch(8)
if USE_DIST:
    ds = strategy.experimental_distribute_dataset(ds)


def step(x):
    return tf.reduce_sum(x * w)


@tf.function
def train(x):
    return strategy.run(step, args=(x,))


for batch in ds:
    train(batch)  # expect: TFP201
