# A strategy made on the path the model is trained on, whose scope nothing enters: the model trains
# on one device (the scope stored but never entered is not entered).
import tensorflow as tf


def build():
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, input_shape=(8,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    return model


def main(kind, ds):
    if kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        strategy = tf.distribute.TPUStrategy(resolver)
        strategy_scope = strategy.scope()
    elif kind == "gpu":
        strategy = tf.distribute.MirroredStrategy()
        strategy_scope = strategy.scope()
    print("replicas:", strategy.num_replicas_in_sync)
    model = build()  # expect: TFP101
    model.fit(ds, epochs=1)


def snippet():
    model = tf.keras.applications.Xception(weights=None)  # expect: TFP101
    mirrored = tf.distribute.MirroredStrategy(devices=["/gpu:1", "/gpu:2"])
