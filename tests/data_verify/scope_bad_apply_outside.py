"""TFP106: apply_gradients on a scoped optimizer, outside scope and replica fn."""
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
x = np.random.rand(16, 4).astype("float32")
y = np.random.rand(16, 1).astype("float32")
with tf.GradientTape() as tape:
    loss = tf.reduce_mean((model(x) - y) ** 2)
grads = tape.gradient(loss, model.trainable_variables)
optimizer.apply_gradients(zip(grads, model.trainable_variables))  # expect: TFP106
