import tensorflow as tf
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.dummy import Pool
total = tf.Variable(0.0)
def work(i):
    total.assign(total.read_value() + i)  # expect: TFP301
with ThreadPoolExecutor(4) as ex:
    list(ex.map(work, range(8)))
def work2(i):
    cur = total.numpy()
    total.assign(cur + i)  # expect: TFP301
pool = Pool(4)
pool.map(work2, range(8))
