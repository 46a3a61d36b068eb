import tensorflow as tf

USE_FN = False
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    w = tf.Variable(1.0)

ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(i, tf.float32)).batch(8)
if USE_FN:
    dist = strategy.distribute_datasets_from_function(lambda ctx: ds.shard(ctx.num_input_pipelines,
                                                                          ctx.input_pipeline_id))
else:
    dist = strategy.experimental_distribute_dataset(ds)


def step(x):
    return tf.reduce_sum(x * w)


@tf.function
def train(x):
    return strategy.run(step, args=(x,))


for batch in dist:
    train(batch)
