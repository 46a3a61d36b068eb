import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
def step(x):
    return x * 2
with strategy.scope():
    s = tf.distribute.get_strategy()
    for batch in s.experimental_distribute_dataset(ds):
        s.run(step, args=(batch,))
