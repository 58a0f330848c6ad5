#!/usr/bin/python3
"""Check that every relative link in README.md and docs/**/*.md resolves: the file exists, and a
#anchor names a heading of the markdown file it points into. Usage: scripts/check_doc_links.py [ROOT]"""
import glob, os, re, sys
LINK = re.compile(r'\]\(([^)\s]+)\)')
def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')
def anchors(md):
    out, seen, fence = set(), {}, False
    for l in open(md):
        if l.startswith('```'): fence = not fence; continue
        if fence: continue
        m = re.match(r'#{1,6} (.*)', l)
        if m:
            s = slug(m.group(1)); n = seen.get(s, 0); seen[s] = n + 1
            out.add(s if n == 0 else f'{s}-{n}')
    return out
root = sys.argv[1] if len(sys.argv) > 1 else '.'
os.chdir(root)
bad = 0
for md in ['README.md'] + sorted(glob.glob('docs/**/*.md', recursive=True)):
    fence = False
    for i, l in enumerate(open(md), 1):
        if l.startswith('```'): fence = not fence; continue
        if fence: continue
        for t in LINK.findall(l):
            if re.match(r'^[a-z]+:', t): continue
            p, _, a = t.partition('#')
            tgt = os.path.normpath(os.path.join(os.path.dirname(md), p)) if p else md
            if not os.path.exists(tgt):
                print(f'{md}:{i}: missing {t}'); bad += 1
            elif a and tgt.endswith('.md') and a not in anchors(tgt):
                print(f'{md}:{i}: no anchor {t}'); bad += 1
print(f'{bad} broken link(s)'); sys.exit(1 if bad else 0)
