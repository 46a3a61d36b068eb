"""TFP203 under MultiWorkerMirroredStrategy: every worker reads the same data."""
import tensorflow as tf

GLOBAL_BATCH = 8
strategy = tf.distribute.MultiWorkerMirroredStrategy()


def dataset_fn(input_context):
    ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(tf.fill([2], i), tf.float32))
    return ds.batch(GLOBAL_BATCH)


dist = strategy.distribute_datasets_from_function(dataset_fn)  # expect: TFP203


@tf.function
def step(b):
    def replica_fn(x):
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce("sum", tf.reduce_sum(x))

    return strategy.run(replica_fn, args=(b,))


for b in dist:
    step(b)
print("done", strategy.num_replicas_in_sync)
