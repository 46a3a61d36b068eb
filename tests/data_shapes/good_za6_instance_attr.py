import tensorflow as tf


class Config:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()


cfg = Config()
with cfg.strategy.scope():
    net = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    net.compile(optimizer="sgd", loss="mse")
