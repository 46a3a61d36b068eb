import tensorflow as tf


class Config:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()


def fit(model, cfg):
    with cfg.strategy.scope():
        model.compile(optimizer="sgd", loss="mse")


net = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])  # expect: TFP101
fit(net, Config())
