"""Crash symptom "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE`"
(TFP502): a tf_keras loss object with the default reduction called inside strategy.run."""
import tensorflow as tf
import tf_keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    loss_object = tf_keras.losses.MeanSquaredError()


def step():
    return loss_object(tf.ones([4, 1]), tf.zeros([4, 1]))  # expect: TFP502


strategy.run(step)
