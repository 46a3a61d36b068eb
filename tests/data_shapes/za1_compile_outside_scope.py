import keras
import tensorflow as tf

with tf.distribute.MirroredStrategy().scope():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
model.compile(
    optimizer=keras.optimizers.Adam(),  # expect: TFP102
    loss="mse",
    metrics=[keras.metrics.MeanAbsoluteError()],  # expect: TFP103
)
