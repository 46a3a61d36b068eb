"""Keras fit on MNIST under MirroredStrategy, everything in scope (good).

Offline the verifier replaces keras.datasets.mnist.load_data with synthetic arrays
of the same shapes and dtypes; fit is cut to one epoch of --max-steps steps.
"""
import tensorflow as tf
import keras

(x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
print("shapes", x_train.shape, x_train.dtype, y_train.shape, y_train.dtype, x_test.shape)
x_train = x_train[:4096].astype("float32") / 255.0
y_train = y_train[:4096]

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([
        keras.Input((28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=64, epochs=5)
model.evaluate(x_test[:512].astype("float32") / 255.0, y_test[:512], verbose=0)
