# Two-path definitions: the mistake holds on one branch, and is reported with that branch.
import tensorflow as tf
from tensorflow.keras.models import load_model


def train(path, lr, n_gpus=2, cosine=False):
    strategy = tf.distribute.MirroredStrategy()
    if n_gpus > 1:
        with strategy.scope():
            model = load_model(path)
    else:
        model = load_model(path)
    if cosine:
        optimizer = tf.keras.optimizers.SGD(learning_rate=lr)  # expect: TFP102
    else:
        optimizer = tf.keras.optimizers.Adam(learning_rate=lr)  # expect: TFP102
    model.compile(optimizer=optimizer, loss="mae")
    return model
