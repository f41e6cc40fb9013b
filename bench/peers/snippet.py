# bench/snippet.lua in Python, for Pydantic Monty (bench/peers/monty.mjs): the same records,
# the same steps, the same leaderboard text and digest, so the two sides do the same work.
import math


def titlecase(s):
    return s[:1].upper() + s[1:].lower()


def checksum(s):
    h = 0
    for ch in s:
        h = (h * 31 + ord(ch)) % 1000003
    return h


by_dept = {}
active = []
total = 0
squares = 0
for r in records:
    if r['active']:
        active.append(r)
        total = total + r['salary']
        squares = squares + r['salary'] * r['salary']
        d = by_dept.get(r['dept'])
        if d is None:
            d = {'n': 0, 'sum': 0, 'best': r}
            by_dept[r['dept']] = d
        d['n'] = d['n'] + 1
        d['sum'] = d['sum'] + r['salary']
        if r['rating'] > d['best']['rating']:
            d['best'] = r


def top(items, k, key):
    picked = []
    used = {}
    for _ in range(min(k, len(items))):
        best = None
        for i in range(len(items)):
            if i not in used and (best is None or key(items[i]) > key(items[best])):
                best = i
        used[best] = True
        picked.append(items[best])
    return picked


departments = {}
for name, d in by_dept.items():
    departments[name] = {'headcount': d['n'], 'mean_salary': math.floor(d['sum'] / d['n'] + 0.5),
                         'star': titlecase(d['best']['name'])}

board = ''
i = 0
for r in top(active, 5, lambda r: r['rating'] * 1000 - r['id']):
    i = i + 1
    board = board + f"{i}. {titlecase(r['name']):<8} {r['dept'].upper():<5} {r['rating']:5.2f} #{r['tags'][0]}\n"

n = len(active)
mean = total / n if n > 0 else 0
result = {'count': n, 'mean_salary': mean, 'departments': departments, 'board': board,
          'stddev': math.sqrt(max(squares / n - mean * mean, 0)) if n > 0 else 0,
          'digest': checksum(board)}
result
