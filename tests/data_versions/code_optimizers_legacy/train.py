"""A multi-worker Keras job with a legacy optimizer (TensorFlow 2.9 to 2.15), made outside the scope, and
the model trained with fit."""
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
optimizer = tf.keras.optimizers.legacy.Adam(1e-3)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)
model.fit(dataset, epochs=1)
