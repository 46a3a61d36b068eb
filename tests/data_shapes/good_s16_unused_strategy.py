import tensorflow as tf


def build():
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, input_shape=(8,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    return model


def main(n_gpus, ds):
    strategy = tf.distribute.MirroredStrategy()
    if n_gpus > 1:
        with strategy.scope():
            model = build()
    else:
        model = build()  # the single-device path: the strategy's scope is entered on the other one
    model.fit(ds, epochs=1)


def one_device(ds):
    strategy = tf.distribute.OneDeviceStrategy("/gpu:0")  # one replica: nothing to distribute
    model = build()
    model.fit(ds, epochs=1)
    return strategy


def elsewhere():
    model = tf.keras.applications.Xception(weights=None)
    mirrored = tf.distribute.MirroredStrategy(devices=["/gpu:1", "/gpu:2"])
    return model, mirrored  # used by the caller: not judged here
