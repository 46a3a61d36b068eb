"""The same loop on a tf.compat.v1 strategy, which keeps `experimental_run` and `make_dataset_iterator` on
every release: no evidence of the version (the newest is assumed: tf.keras is Keras 3 and TFP502, a Keras 2
rule, does not apply)."""
import tensorflow as tf

strategy = tf.compat.v1.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_object = tf.keras.losses.MeanSquaredError()
    batches = strategy.make_dataset_iterator(
        tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8))


def train_step(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
        loss = loss_object(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


@tf.function
def distributed_train():
    return strategy.experimental_run(train_step, batches)
