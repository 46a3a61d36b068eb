"""A multi-worker Keras job written for TensorFlow 2.0/2.1 (`strategy.experimental_run_v2`): the optimizer is
made outside the scope and the model is trained with fit."""
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
optimizer = tf.keras.optimizers.Adam(1e-3)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)
model.fit(dataset, epochs=1)


@tf.function
def evaluate(x):
    return strategy.experimental_run_v2(model, args=(x,))
