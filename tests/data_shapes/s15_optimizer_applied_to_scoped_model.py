# The optimizer is never seen in a replica function or compile (the loop is elsewhere), but it
# updates the variables of a model built in the scope: it must be created there too.
import tensorflow as tf
from tensorflow import keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(1,))])

optimizer = keras.optimizers.SGD(learning_rate=1e-3)  # expect: TFP102


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(features, training=True) - labels))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss
