"""A multi-worker Keras job handed to a pipeline component whose packages and image are constants of
another module: the code states what installs, where this file cannot read it."""
from pipeline_deps import BASE_IMAGE, TF_PACKAGE
from pipeline_sdk import component


@component(base_image=BASE_IMAGE, packages_to_install=[TF_PACKAGE, "pandas==1.3.2"])
def train_job():
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    optimizer = tf.keras.optimizers.Adam(1e-3)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Normalization(), tf.keras.layers.Dense(1)])
        model.compile(optimizer=optimizer, loss="mse")
    dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)
    model.fit(dataset, epochs=1)
