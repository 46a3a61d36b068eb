import functools
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
def helper():
    tf.random.set_seed(0)  # expect: TFP401
def step(scale, x):
    helper()
    return tf.random.normal([2]) * scale + x  # expect: TFP403
dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2))
for b in dist:
    strategy.run(functools.partial(step, 2.0), args=(b,))
