"""Crash symptom "destinations can not be empty" (TFP513): Keras 3 gradients computed in the outer
tf.function, outside strategy.run, applied untouched by every replica."""
import keras
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
x = np.ones((16, 4), "float32")
y = np.ones((16, 1), "float32")
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.1)


@tf.function
def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(model(features) - labels)) / 16
    grads = tape.gradient(loss, model.trainable_variables)

    def apply_step():
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # expect: TFP513

    strategy.run(apply_step)
    return loss


train_step(x, y)
