"""Cold lint time of two trees of tfpar-lint on the same corpus (issue 8 before/after).

Set OLD to a worktree of the old commit (git worktree add /tmp/oldtree aec08d1); 3 rounds,
-j1 and -j2, median wall and CPU (os.wait4 rusage: the process and its children)."""
import os, subprocess, time, statistics, sys
SP='/work/main/.venv/lib/python3.11/site-packages'
corpus=[f'{SP}/tensorflow', f'{SP}/keras', f'{SP}/tf_keras', '/tmp/oldtree/fixtures']
def timed(tree, j):
    env=dict(os.environ, PYTHONPATH=f'{tree}/src')
    t=time.perf_counter()
    p=subprocess.Popen(['/work/main/.venv/bin/python','-m','tfpar_lint','--no-cache','-j',str(j),'--exit-zero',*corpus], cwd='/tmp', env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _,st,ru=os.wait4(p.pid,0)
    return time.perf_counter()-t, ru.ru_utime+ru.ru_stime
res={}
for rnd in range(3):
    for tree in ('/tmp/oldtree','/work/main'):
        for j in (1,2):
            res.setdefault((tree,j),[]).append(timed(tree,j))
for k,v in res.items():
    print(k, 'wall', round(statistics.median(x[0] for x in v),2), 'cpu', round(statistics.median(x[1] for x in v),2), [tuple(round(a,1) for a in x) for x in v])
