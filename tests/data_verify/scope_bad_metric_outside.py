"""TFP103: metric created outside the scope, passed to compile under it."""
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
mae = keras.metrics.MeanAbsoluteError()  # expect: TFP103
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=[mae])
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
