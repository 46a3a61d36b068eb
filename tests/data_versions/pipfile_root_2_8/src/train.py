"""A multi-worker Keras job: the optimizer is made outside the scope and the model is trained with fit."""
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
optimizer = tf.keras.optimizers.Adam(1e-3)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)
model.fit(dataset, epochs=1)
