"""Crash symptom "`apply_gradients() cannot be called in cross-replica context" (TFP111): a legacy
tf_keras optimizer stepped in the scope, outside strategy.run."""
import numpy as np
import tensorflow as tf
import tf_keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(4,))])
    optimizer = tf_keras.optimizers.legacy.SGD(0.01)
x = np.ones((8, 4), "float32")
y = np.ones((8, 1), "float32")
with tf.GradientTape() as tape:
    loss = tf.reduce_mean((model(x) - y) ** 2)
grads = tape.gradient(loss, model.trainable_variables)
with strategy.scope():
    optimizer.apply_gradients(zip(grads, model.trainable_variables))  # expect: TFP111
