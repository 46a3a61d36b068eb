import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
it = iter(strategy.experimental_distribute_dataset(ds))
def replica_fn(x):
    return x * 2
strategy.experimental_run_v2(replica_fn, args=(next(it),))
