import tensorflow as tf
from tensorflow import keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(1,))])
    optimizer = keras.optimizers.SGD(learning_rate=1e-3)

cpu_model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(1,))])
cpu_optimizer = keras.optimizers.SGD(learning_rate=1e-3)  # trains the plain model only


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(features, training=True) - labels))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    with tf.GradientTape() as tape:
        cpu_loss = tf.reduce_mean(tf.square(cpu_model(features) - labels))
    cpu_grads = tape.gradient(cpu_loss, cpu_model.trainable_variables)
    cpu_optimizer.apply_gradients(zip(cpu_grads, cpu_model.trainable_variables))
    return loss
