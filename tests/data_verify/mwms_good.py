"""MultiWorkerMirroredStrategy with a dataset_fn that shards and batches per replica."""
import tensorflow as tf

GLOBAL_BATCH = 8
strategy = tf.distribute.MultiWorkerMirroredStrategy()


def dataset_fn(input_context):
    bs = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(tf.fill([2], i), tf.float32))
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(bs)


dist = strategy.distribute_datasets_from_function(dataset_fn)


@tf.function
def step(b):
    def replica_fn(x):
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce("sum", tf.reduce_sum(x))

    return strategy.run(replica_fn, args=(b,))


for b in dist:
    step(b)
print("done", strategy.num_replicas_in_sync)
