import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
it = iter(ds)
def replica_fn():
    x = next(it)
    return x * 2
strategy.experimental_run_v2(replica_fn)  # expect: TFP201
strategy.extended.call_for_each_replica(replica_fn)  # expect: TFP201
