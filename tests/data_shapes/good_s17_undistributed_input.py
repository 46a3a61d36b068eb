import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.SGD(0.1)

features = np.load("features.npy")
labels = np.load("labels.npy")
ds = tf.data.Dataset.from_tensor_slices((features, labels)).batch(64)
dist = strategy.experimental_distribute_dataset(ds)
schedule = np.linspace(0.1, 0.01, 10)


def train_step(inputs, lr):
    images, targets = inputs
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.keras.losses.categorical_crossentropy(targets, model(images)))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.learning_rate = lr  # every replica gets the same rate on purpose
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def distributed_step(batch, lr):
    return strategy.run(train_step, args=(batch, lr))


for lr, batch in zip(schedule, dist):
    distributed_step(batch, lr)


@tf.function
def pair_step(x, y):
    return strategy.run(train_step, args=((x, y), 0.1))


for i, (x, y) in enumerate(dist):
    pair_step(x, y)


def loop(dist_data, steps):
    """The data arrives from a caller not in this file: it may be distributed."""
    for batch in dist_data:
        distributed_step(batch, 0.1)
