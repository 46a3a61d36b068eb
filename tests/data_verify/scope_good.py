"""Everything in scope; custom loop on a distributed dataset."""
import numpy as np
import tensorflow as tf
import keras

GLOBAL_BATCH = 16
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    loss_metric = keras.metrics.Mean()
x = np.random.rand(128, 4).astype("float32")
y = np.random.rand(128, 1).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
dist = strategy.experimental_distribute_dataset(ds)


@tf.function
def train_step(batch):
    def replica_fn(xb, yb):
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum((model(xb) - yb) ** 2, axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        loss_metric.update_state(per_example)  # not the scaled loss: a Mean of those is 1/N of the loss
        return loss

    return strategy.run(replica_fn, args=batch)


for epoch in range(3):
    for batch in dist:
        train_step(batch)
print("loss", loss_metric.result().numpy())
