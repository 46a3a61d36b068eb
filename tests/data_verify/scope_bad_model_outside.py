"""TFP101: Keras model built outside the scope, compiled and fit inside."""
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])  # expect: TFP101
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
