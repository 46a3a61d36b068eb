import functools

import tensorflow as tf


def build(n_in, n_out):
    return tf.keras.Sequential([tf.keras.Input((n_in,)), tf.keras.layers.Dense(n_out)])


def load(ctx, batch):
    return tf.data.Dataset.range(8).batch(batch)


strategy = tf.distribute.MirroredStrategy()
builder = functools.partial(build, 3)
net = builder(1)  # expect: TFP101
with strategy.scope():
    net.compile(optimizer="sgd", loss="mse")
loader = functools.partial(load, batch=4)
dist = strategy.distribute_datasets_from_function(loader)  # expect: TFP203
