import tensorflow as tf


def make_metrics():
    return [tf.keras.metrics.AUC(), tf.keras.metrics.Precision()]


strategy = tf.distribute.MirroredStrategy()
tracked = make_metrics()  # expect: TFP103
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=tracked)
