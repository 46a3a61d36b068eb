"""A multi-worker Keras job: the optimizer is made outside the scope and the model is trained with fit."""
import tensorflow as tf
import tf_keras

strategy = tf.distribute.MultiWorkerMirroredStrategy()
optimizer = tf_keras.optimizers.Adam(1e-3)
with strategy.scope():
    model = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)
model.fit(dataset, epochs=1)
