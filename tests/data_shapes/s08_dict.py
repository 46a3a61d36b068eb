import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
datasets = {"train": tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)}
def step(x):
    return x * 2
for batch in datasets["train"]:
    strategy.run(step, args=(batch,))  # expect: TFP201
dsl = [tf.data.Dataset.range(4)] * 2  # expect: TFP202
