import tensorflow as tf


def make_metrics():
    return [tf.keras.metrics.AUC(), tf.keras.metrics.Precision()]


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    tracked = make_metrics()
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=tracked)
plain = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
plain.compile(optimizer="sgd", loss="mse", metrics=make_metrics())
