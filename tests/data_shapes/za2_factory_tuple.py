import tensorflow as tf


def make(n):
    model = tf.keras.Sequential([tf.keras.Input((n,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD()
    return model, optimizer


strategy = tf.distribute.MirroredStrategy()
model, optimizer = make(4)  # expect: TFP101, TFP102
with strategy.scope():
    model.compile(optimizer=optimizer, loss="mse")
