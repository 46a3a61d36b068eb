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
def build():
    return tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])


@in_scope
def train(model):
    model.compile(optimizer="sgd", loss="mse")


def fit_plain(model):
    model.compile(optimizer="sgd", loss="mse")


net = build()
train(net)
plain = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
fit_plain(plain)
