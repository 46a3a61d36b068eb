import tensorflow as tf
from tensorflow.keras.models import load_model


def train(path, lr, n_gpus=2, cosine=False):
    strategy = tf.distribute.MirroredStrategy()
    if n_gpus > 1:
        with strategy.scope():
            model = load_model(path)
            optimizer = tf.keras.optimizers.Adam(learning_rate=lr)
            model.compile(optimizer=optimizer, loss="mae")
    else:
        model = load_model(path)
        if cosine:
            optimizer = tf.keras.optimizers.SGD(learning_rate=lr)
        else:
            optimizer = tf.keras.optimizers.Adam(learning_rate=lr)
        model.compile(optimizer=optimizer, loss="mae")
    return model
