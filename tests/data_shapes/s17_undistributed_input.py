# Input is distributed only when a distribution API made it: batches of a Keras iterator, data a
# replica function reads from outside it, a plain dataset through nested loop targets.
import numpy as np
import tensorflow as tf
from tensorflow.keras.preprocessing.image import ImageDataGenerator

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.SGD(0.1)

batches = ImageDataGenerator(rescale=1.0 / 255).flow_from_directory("./train", batch_size=64)
features = np.load("features.npy")
labels = np.load("labels.npy")


def train_step(inputs, lr):
    images, targets = inputs
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.keras.losses.categorical_crossentropy(targets, model(images)))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.learning_rate = lr
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def full_batch_step():
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.square(model(features) - labels))  # expect: TFP201
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def distributed_step(batch, lr):
    return strategy.run(train_step, args=(batch, lr))  # expect: TFP201


@tf.function
def full_batch():
    return strategy.run(full_batch_step, args=())


it = iter(batches)
for epoch, lr in enumerate([0.1, 0.01]):
    distributed_step(next(it), lr)
    full_batch()

ds = tf.data.Dataset.from_tensor_slices((features, labels)).batch(64)


@tf.function
def pair_step(x, y):
    return strategy.run(train_step, args=((x, y), 0.1))  # expect: TFP201


for i, (x, y) in enumerate(ds):
    pair_step(x, y)


@tf.function
def whole_array_step():
    return strategy.run(train_step, args=((features, labels), 0.1))  # expect: TFP201
