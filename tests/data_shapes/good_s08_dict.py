import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
datasets = {"train": tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)}
dist = {k: strategy.experimental_distribute_dataset(v) for k, v in datasets.items()}
def step(x):
    return x * 2
for batch in dist["train"]:
    strategy.run(step, args=(batch,))
mixed = tf.data.Dataset.sample_from_datasets([tf.data.Dataset.range(4)] * 2)
