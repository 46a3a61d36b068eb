"""Per-replica input done right: dataset_fn shards/batches, values_fn uses ctx."""
import tensorflow as tf

GLOBAL_BATCH = 16
strategy = tf.distribute.MirroredStrategy()


def dataset_fn(input_context):
    bs = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    ds = tf.data.Dataset.range(512).map(lambda i: tf.cast(tf.fill([4], i), tf.float32))
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(bs).prefetch(2)


dist = strategy.distribute_datasets_from_function(dataset_fn)
values = strategy.experimental_distribute_values_from_function(
    lambda ctx: tf.fill([4, 2], float(ctx.replica_id_in_sync_group)))


@tf.function
def step(b):
    return strategy.run(lambda x: tf.reduce_sum(x), args=(b,))


for b in dist:
    step(b)
strategy.run(lambda v: tf.reduce_sum(v), args=(values,))
