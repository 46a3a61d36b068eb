import functools

import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()


def in_scope(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with strategy.scope():
            return fn(*args, **kwargs)

    return wrapper


@in_scope
def train(model):
    model.compile(optimizer="sgd", loss="mse")


def fit_all(model):
    model.compile(optimizer="sgd", loss="mse")


net = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])  # expect: TFP101
train(net)
other = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])  # expect: TFP101
with strategy.scope():
    fit_all(other)
